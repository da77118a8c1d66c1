package safetensors_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/safetensors"
)

func Example() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "weights.safetensors")

	data, _ := dtype.FromFloat32(dtype.BF16, []float32{1, 2, 3, 4, 5, 6})
	err = safetensors.Write(path, []safetensors.Tensor{
		{Name: "w", DType: dtype.BF16, Shape: []int64{2, 3}, Data: data},
	}, map[string]string{"format": "pt"})
	if err != nil {
		fmt.Println(err)
		return
	}

	f, err := safetensors.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	info, _ := f.Info("w")
	w, _ := f.Float32("w")
	fmt.Println(f.Names(), info.DType, info.Shape, info.NumElements(), w)
	// Output: [w] BF16 [2 3] 6 [1 2 3 4 5 6]
}

func ExampleParseHeader() {
	_, err := safetensors.ParseHeader([]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},`+
		`"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`), 8)
	fmt.Println(err)
	// Output: safetensors: tensor "b": data_offsets: span [4,8) overlaps "a"
}
