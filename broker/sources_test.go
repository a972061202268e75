package broker

import (
	"reflect"
	"testing"
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
		reflect.TypeFor[registrySide](), reflect.TypeFor[cloudSide](), reflect.TypeFor[capabilities](),
		reflect.TypeFor[lister](), reflect.TypeFor[registryLayer](),
	} {
		walk(typ.Name(), typ, map[reflect.Type]bool{})
	}
}
