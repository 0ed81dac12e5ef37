package resourceclaim

import "strings"

const (
	// maxGenerateNameBase is the longest "<pod>-<podclaim>" that we use.
	// With the hyphen and the five random characters that the server
	// appends, a generated name stays within 63 characters, so it can
	// also be used as a label value.
	maxGenerateNameBase = 57
)

// claimGenerateName returns the generateName of the claim for one pod
// claim: "<pod>-<podclaim>-".
//
// When "<pod>-<podclaim>" is longer than 57 characters, the pod name and
// the pod claim name share the 56 characters that are left besides the
// hyphen: each keeps up to half of them, and what the shorter one doesn't
// need goes to the longer one. So a short pod claim name survives a long
// pod name intact, and both stay recognisable when both are long. The
// server's own truncation would cut from the end and lose the pod claim
// name entirely. Hyphens and dots at the end of a shortened part are
// dropped so that the result stays a valid name.
func claimGenerateName(podName, podClaimName string) string {
	if len(podName)+1+len(podClaimName) <= maxGenerateNameBase {
		return podName + "-" + podClaimName + "-"
	}
	budget := maxGenerateNameBase - 1
	podLen, claimLen := len(podName), len(podClaimName)
	half := budget / 2
	switch {
	case claimLen <= half:
		podLen = budget - claimLen
	case podLen <= half:
		claimLen = budget - podLen
	default:
		podLen = half
		claimLen = budget - half
	}
	podPart := strings.TrimRight(podName[:podLen], "-.")
	claimPart := strings.TrimRight(podClaimName[:claimLen], "-.")
	return podPart + "-" + claimPart + "-"
}
