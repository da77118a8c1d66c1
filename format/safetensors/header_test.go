package safetensors

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// f32x2 is a valid entry body for an F32 [2] tensor at [0,8).
const f32x2 = `{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`

func TestMalformed(t *testing.T) {
	data8 := make([]byte, 8)
	prefixOnly := func(n uint64, total int) []byte {
		b := make([]byte, total)
		binary.LittleEndian.PutUint64(b, n)
		copy(b[8:], "{}")
		return b
	}
	tests := []struct {
		name   string
		file   []byte
		tensor string
		field  string
		msg    string // a substring of the message
	}{
		// The length prefix.
		{"empty file", nil, "", FieldHeaderSize, "too short"},
		{"short file", []byte{1, 0, 0}, "", FieldHeaderSize, "too short"},
		{"header size zero", prefixOnly(0, 16), "", FieldHeaderSize, "is 0"},
		{"header too long", prefixOnly(MaxHeaderSize+1, 64), "", FieldHeaderSize, "limit"},
		{"header size huge", prefixOnly(1<<63, 64), "", FieldHeaderSize, "limit"},
		{"header past file end", prefixOnly(100, 64), "", FieldHeaderSize, "truncated"},
		{"truncated data", rawFile(`{"a":`+f32x2+`}`, data8[:5]), "a", FieldDataOffsets, "past the end"},

		// JSON syntax and shape of the header.
		{"bad JSON", rawFile(`{"a":`, nil), "a", FieldHeader, "invalid JSON"},
		{"bad JSON in shape", rawFile(`{"a":{"dtype":"F32","shape":[2,}}`, nil), "a", FieldHeader, "invalid JSON in shape"},
		{"bad JSON literal", rawFile(`{"a":tru}`, nil), "a", FieldHeader, "invalid JSON"},
		{"trailing comma", rawFile(`{"a":`+f32x2+`,}`, data8), "", FieldHeader, "invalid JSON"},
		{"missing comma", rawFile(`{"a":`+f32x2+` "b":`+f32x2+`}`, data8), "", FieldHeader, "invalid JSON"},
		{"not an object", rawFile(`[1,2]`, nil), "", FieldHeader, "want '{'"},
		{"leading space", rawFile(` {}`, nil), "", FieldHeader, "want '{'"},
		{"garbage after object", rawFile(`{}x`, nil), "", FieldHeader, "after the header object"},
		{"second object", rawFile(`{} {}`, nil), "", FieldHeader, "after the header object"},
		{"NUL padding", rawFile("{}\x00", nil), "", FieldHeader, "after the header object"},
		{"invalid UTF-8", rawFile("{\"\xff\":"+f32x2+"}", data8), "", FieldHeader, "UTF-8"},
		{"entry not an object", rawFile(`{"a":5}`, nil), "a", FieldHeader, "want an object"},
		{"entry null", rawFile(`{"a":null}`, nil), "a", FieldHeader, "null"},
		{"unknown field", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, data8), "a", FieldHeader, `unknown field "x"`},
		{"empty name", rawFile(`{"":`+f32x2+`}`, data8), "", FieldName, "empty"},

		// Duplicates.
		{"duplicate tensor", rawFile(`{"a":`+f32x2+`,"a":`+f32x2+`}`, data8), "a", FieldName, "duplicate"},
		{"duplicate tensor escaped", rawFile(`{"a":`+f32x2+`,"\u0061":`+f32x2+`}`, data8), "a", FieldName, "duplicate"},
		{"duplicate field", rawFile(`{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, data8), "a", FieldDType, "duplicate"},
		{"duplicate shape", rawFile(`{"a":{"dtype":"F32","shape":[2],"shape":[2],"data_offsets":[0,8]}}`, data8), "a", FieldShape, "duplicate"},
		{"duplicate offsets", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"data_offsets":[0,8]}}`, data8), "a", FieldDataOffsets, "duplicate"},
		{"duplicate metadata key", rawFile(`{"__metadata__":{"k":"1","k":"2"}}`, nil), "", FieldMetadata, `duplicate key "k"`},
		{"duplicate metadata", rawFile(`{"__metadata__":{},"__metadata__":{}}`, nil), "", FieldMetadata, "duplicate"},

		// Metadata.
		{"metadata value number", rawFile(`{"__metadata__":{"k":1}}`, nil), "", FieldMetadata, "want a string value"},
		{"metadata value object", rawFile(`{"__metadata__":{"k":{}}}`, nil), "", FieldMetadata, "want a string value"},
		{"metadata null", rawFile(`{"__metadata__":null}`, nil), "", FieldMetadata, "want an object"},
		{"metadata string", rawFile(`{"__metadata__":"x"}`, nil), "", FieldMetadata, "want an object"},

		// dtype.
		{"unknown dtype", rawFile(`{"a":{"dtype":"F128","shape":[2],"data_offsets":[0,8]}}`, data8), "a", FieldDType, `unknown dtype "F128"`},
		{"lower-case dtype", rawFile(`{"a":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}}`, data8), "a", FieldDType, "unknown dtype"},
		{"dtype not a string", rawFile(`{"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}}`, data8), "a", FieldDType, "want a string"},
		{"missing dtype", rawFile(`{"a":{"shape":[2],"data_offsets":[0,8]}}`, data8), "a", FieldDType, "missing"},

		// shape.
		{"negative dim", rawFile(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, data8), "a", FieldShape, "non-negative"},
		{"fractional dim", rawFile(`{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}`, data8), "a", FieldShape, "want an integer"},
		{"exponent dim", rawFile(`{"a":{"dtype":"F32","shape":[2e0],"data_offsets":[0,8]}}`, data8), "a", FieldShape, "want an integer"},
		{"dim beyond int64", rawFile(`{"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}}`, data8), "a", FieldShape, "too large"},
		{"dim product overflows", rawFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, data8), "a", FieldShape, "too large"},
		{"bytes overflow", rawFile(`{"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}}`, data8), "a", FieldShape, "too large"},
		{"overflow beside zero", rawFile(`{"a":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}}`, nil), "a", FieldShape, "too large"},
		{"nested shape", rawFile(`{"a":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}}`, data8), "a", FieldShape, "want an integer"},
		{"shape not array", rawFile(`{"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}}`, data8), "a", FieldShape, "want an array"},
		{"missing shape", rawFile(`{"a":{"dtype":"F32","data_offsets":[0,8]}}`, data8), "a", FieldShape, "missing"},

		// data_offsets.
		{"shape offset mismatch", rawFile(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, data8), "a", FieldDataOffsets, "needs 12"},
		{"dtype offset mismatch", rawFile(`{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,8]}}`, data8), "a", FieldDataOffsets, "needs 4"},
		{"one offset", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}}`, data8), "a", FieldDataOffsets, "exactly 2"},
		{"three offsets", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}`, data8), "a", FieldDataOffsets, "exactly 2"},
		{"negative offset", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}}`, data8), "a", FieldDataOffsets, "non-negative"},
		{"reversed span", rawFile(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, data8), "a", FieldDataOffsets, "ends before it begins"},
		{"span past end", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, data8), "a", FieldDataOffsets, "past the end"},
		{"missing offsets", rawFile(`{"a":{"dtype":"F32","shape":[2]}}`, data8), "a", FieldDataOffsets, "missing"},
		{"overlap", rawFile(`{"a":`+f32x2+`,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 12)), "b", FieldDataOffsets, `span [4,12) overlaps "a"`},
		{"same span", rawFile(`{"a":`+f32x2+`,"b":`+f32x2+`}`, data8), "b", FieldDataOffsets, `overlaps "a"`},
		{"empty span inside another", rawFile(`{"a":`+f32x2+`,"b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}}`, data8), "b", FieldDataOffsets, `overlaps "a"`},
		{"gap", rawFile(`{"a":`+f32x2+`,"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}}`, make([]byte, 20)), "b", FieldDataOffsets, `gap [8,12) after "a"`},
		{"gap at start", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, data8), "a", FieldDataOffsets, "gap [0,4) at the start"},
		{"trailing bytes", rawFile(`{"a":`+f32x2+`}`, make([]byte, 9)), "", FieldData, "1 bytes after the last tensor"},
		{"data but no tensors", rawFile(`{}`, data8), "", FieldData, "8 bytes after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTemp(t, "bad.safetensors", tt.file)
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatalf("Open succeeded")
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FormatError", err, err)
			}
			if fe.File != path || fe.Tensor != tt.tensor || fe.Field != tt.field || !strings.Contains(fe.Msg, tt.msg) {
				t.Fatalf("got %#v\nwant File %q Tensor %q Field %q Msg containing %q", fe, path, tt.tensor, tt.field, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "safetensors: "+path+": ") {
				t.Errorf("message %q does not start with the file", err)
			}
			// ParseHeader must agree wherever the header itself is readable.
			if len(tt.file) >= 8 {
				n := binary.LittleEndian.Uint64(tt.file)
				if n > 0 && n <= uint64(len(tt.file)-8) {
					_, err := ParseHeader(tt.file[8:8+n], int64(uint64(len(tt.file))-8-n))
					var pe *FormatError
					if !errors.As(err, &pe) || pe.Field != tt.field || pe.Tensor != tt.tensor || pe.File != "" {
						t.Errorf("ParseHeader: %#v", err)
					}
				}
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	err := &FormatError{File: "file.safetensors", Tensor: "x", Field: FieldDataOffsets, Msg: `span [4,12) overlaps "y"`}
	if got, want := err.Error(), `safetensors: file.safetensors: tensor "x": data_offsets: span [4,12) overlaps "y"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	err = &FormatError{Field: FieldHeader, Msg: "m"}
	if got, want := err.Error(), `safetensors: header: m`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	nf := &NotFoundError{File: "f", Tensor: "t"}
	if got, want := nf.Error(), `safetensors: f: no tensor "t"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestValidEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		header  string
		dataLen int64
		tensors int
	}{
		{"empty object", `{}`, 0, 0},
		{"only metadata", `{"__metadata__":{}}`, 0, 0},
		{"metadata last", `{"a":` + f32x2 + `,"__metadata__":{"k":"v"}}`, 8, 1},
		{"space padding", `{}       `, 0, 0},
		{"whitespace inside", "{ \"a\" : {\"dtype\":\"F32\",\n\"shape\":[ 2 ],\"data_offsets\":[0, 8]} }\n", 8, 1},
		{"scalar", `{"a":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, 8, 1},
		{"zero-size tensors", `{"a":{"dtype":"F32","shape":[0,5],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, 0, 2},
		{"zero-size at end", `{"a":` + f32x2 + `,"b":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}}`, 8, 2},
		{"fields in any order", `{"a":{"data_offsets":[0,8],"shape":[2],"dtype":"F32"}}`, 8, 1},
		{"escaped name", `{"a\"b\u00e9":` + f32x2 + `}`, 8, 1},
		{"all dtypes", `{"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"BOOL","shape":[1],"data_offsets":[1,2]},"c":{"dtype":"U64","shape":[1],"data_offsets":[2,10]}}`, 10, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHeader([]byte(tt.header), tt.dataLen)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Tensors) != tt.tensors {
				t.Errorf("%d tensors, want %d", len(h.Tensors), tt.tensors)
			}
			for _, ti := range h.Tensors {
				if got, ok := h.Tensor(ti.Name); !ok || got.Name != ti.Name {
					t.Errorf("Tensor(%q) = %v, %v", ti.Name, got, ok)
				}
			}
		})
	}
	h, _ := ParseHeader([]byte(`{"a\"b\u00e9":`+f32x2+`}`), 8)
	if h.Tensors[0].Name != "a\"bé" {
		t.Errorf("escaped name decoded as %q", h.Tensors[0].Name)
	}
}

func TestParseHeaderArguments(t *testing.T) {
	for _, tt := range []struct {
		name    string
		header  []byte
		dataLen int64
		field   string
	}{
		{"nil header", nil, 0, FieldHeaderSize},
		{"negative data length", []byte(`{}`), -1, FieldData},
		{"too long", make([]byte, MaxHeaderSize+1), 0, FieldHeaderSize},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHeader(tt.header, tt.dataLen)
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("error %v, want field %s", err, tt.field)
			}
		})
	}
}
