// Package jsonkind names JSON types the way an API user or a person writing
// a JSON file thinks of them, for errors about a value of the wrong type:
// "expected an integer, got JSON string", never Go's "int" or "struct".
package jsonkind

import "reflect"

// OfGo names the JSON type that a Go value of kind k decodes from (the
// type encoding/json wanted when it reports an UnmarshalTypeError).
func OfGo(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	}
	return "another type"
}
