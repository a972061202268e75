package broker

import (
	"reflect"
	"testing"

	tl "github.com/pml-dev/pml/broker/tools"
)

// The registry, the cloud, capabilities and the listing hold what they use
// (issue 42): no field of theirs, nor of a struct they hold by value, is a
// *Broker. What they need of the other parts are functions wired in New.
func TestTheSourcesHoldNoBroker(t *testing.T) {
	broker := reflect.TypeFor[*Broker]()
	var walk func(path string, typ reflect.Type, seen map[reflect.Type]bool)
	walk = func(path string, typ reflect.Type, seen map[reflect.Type]bool) {
		if typ == broker {
			t.Errorf("%s is a *Broker", path)
			return
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			walk(path+"."+f.Name, f.Type, seen)
		}
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[tl.Registry](), reflect.TypeFor[tl.Cloud](), reflect.TypeFor[tl.Capabilities](),
		reflect.TypeFor[tl.Lister](), reflect.TypeFor[tl.Servers](), reflect.TypeFor[registryLayer](),
	} {
		walk(typ.Name(), typ, map[reflect.Type]bool{})
	}
}
