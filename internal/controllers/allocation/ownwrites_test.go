package allocation

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestOwnWrites(t *testing.T) {
	const claim = types.UID("claim")
	type step struct {
		// One of: "begin <pod>", "end <rv>" ("" for a failed write),
		// "observe <rv>", "delete".
		do, arg string
		// writer is what observe must report.
		writer string
	}
	tests := map[string][]step{
		"echo of a write is the writer's": {
			{do: "begin", arg: "ns/pod"},
			{do: "end", arg: "10"},
			{do: "observe", arg: "10", writer: "ns/pod"},
			{do: "observe", arg: "11", writer: ""},
		},
		"echo arriving before the response": {
			{do: "begin", arg: "ns/pod"},
			{do: "observe", arg: "10", writer: "ns/pod"},
			{do: "end", arg: "10"},
			// Its version was seen already; forgotten with the next.
			{do: "observe", arg: "11", writer: ""},
		},
		"failed write leaves nothing behind": {
			{do: "begin", arg: "ns/pod"},
			{do: "end", arg: ""},
			{do: "observe", arg: "10", writer: ""},
		},
		"several writes of one attempt": {
			{do: "begin", arg: "ns/pod"},
			{do: "end", arg: "10"},
			{do: "begin", arg: "ns/pod"},
			{do: "end", arg: "11"},
			{do: "begin", arg: "ns/pod"},
			{do: "end", arg: "14"},
			{do: "observe", arg: "10", writer: "ns/pod"},
			{do: "observe", arg: "11", writer: "ns/pod"},
			{do: "observe", arg: "12", writer: ""},
			{do: "observe", arg: "14", writer: "ns/pod"},
		},
		"versions skipped by a relist are forgotten": {
			{do: "begin", arg: "ns/pod"},
			{do: "end", arg: "10"},
			{do: "observe", arg: "20", writer: ""},
			{do: "observe", arg: "10", writer: ""},
		},
		"write for another pod replaces the writer": {
			{do: "begin", arg: "ns/a"},
			{do: "end", arg: "10"},
			{do: "begin", arg: "ns/b"},
			{do: "end", arg: "11"},
			{do: "observe", arg: "10", writer: ""},
			{do: "observe", arg: "11", writer: "ns/b"},
		},
		"deleted claim": {
			{do: "begin", arg: "ns/pod"},
			{do: "end", arg: "10"},
			{do: "delete"},
			{do: "observe", arg: "10", writer: ""},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			o := newOwnWrites()
			for i, s := range steps {
				switch s.do {
				case "begin":
					o.begin(claim, s.arg)
				case "end":
					o.end(claim, s.arg)
				case "observe", "delete":
					if got := o.observe(claim, s.arg, s.do == "delete"); got != s.writer {
						t.Errorf("step %d (%s %s): writer %q, want %q", i, s.do, s.arg, got, s.writer)
					}
				}
			}
			if len(steps) > 0 && steps[len(steps)-1].do != "begin" && len(o.claims) != 0 {
				t.Errorf("entries left behind: %+v", o.claims[claim])
			}
		})
	}
}
