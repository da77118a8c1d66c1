package dtype_test

import (
	"fmt"

	"github.com/lfmq/lfmq/format/dtype"
)

func ExampleFloat32ToBF16() {
	// 1 + 2^-8 lies exactly halfway between two bfloat16 values; the tie
	// goes to the one with an even last bit.
	fmt.Printf("%#04x\n", dtype.Float32ToBF16(1+1.0/256))
	fmt.Println(dtype.BF16ToFloat32(0x3f80))
	// Output:
	// 0x3f80
	// 1
}

func ExampleToFloat32() {
	src := []byte{0x80, 0x3f, 0x00, 0xc0} // two little-endian BF16 values
	dst := make([]float32, 2)
	if err := dtype.ToFloat32(dtype.BF16, src, dst); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dst)
	// Output: [1 -2]
}
