package cel

import (
	"container/list"
	"sync"
)

// compileCache is a least-recently-used cache of compilation results keyed
// by expression text. Bounded so that a stream of distinct expressions
// (e.g. generated claims with unique selectors) cannot grow memory forever.
type compileCache struct {
	mutex    sync.Mutex
	capacity int
	order    *list.List // front is most recently used; values are *cacheEntry
	entries  map[string]*list.Element
}

type cacheEntry struct {
	expression string
	result     CompilationResult
}

func newCompileCache(capacity int) *compileCache {
	return &compileCache{
		capacity: capacity,
		order:    list.New(),
		entries:  make(map[string]*list.Element),
	}
}

func (c *compileCache) get(expression string) (CompilationResult, bool) {
	c.mutex.Lock()
	defer c.mutex.Unlock()
	element, ok := c.entries[expression]
	if !ok {
		return CompilationResult{}, false
	}
	c.order.MoveToFront(element)
	return element.Value.(*cacheEntry).result, true
}

// add stores a result. Two goroutines may compile the same expression at
// once; the second add just refreshes the entry, which is harmless because
// both results are equivalent.
func (c *compileCache) add(expression string, result CompilationResult) {
	c.mutex.Lock()
	defer c.mutex.Unlock()
	if element, ok := c.entries[expression]; ok {
		element.Value.(*cacheEntry).result = result
		c.order.MoveToFront(element)
		return
	}
	c.entries[expression] = c.order.PushFront(&cacheEntry{expression: expression, result: result})
	for c.order.Len() > c.capacity {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry).expression)
	}
}

func (c *compileCache) len() int {
	c.mutex.Lock()
	defer c.mutex.Unlock()
	return c.order.Len()
}
