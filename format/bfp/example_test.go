package bfp_test

import (
	"fmt"

	"github.com/lfmq/lfmq/format/bfp"
)

// Encode one 32×32 tile in BFP4 and decode it again. Group 0 is the first
// 16 elements of tile row 0; its exponent is byte 0 and its codes, two per
// byte with the even lane in the low nibble, are bytes 64..71.
func ExampleEncodeTile() {
	var src [1024]float32
	copy(src[:16], []float32{0.3, -0.2, 0.05, 0.11, -0.3, 0, 0.26, -0.0625,
		0.1875, -0.15, 0.4, 0.01, -0.45, 0.33, 0.07, -0.12})

	tile := make([]byte, bfp.BFP4.TileBytes())
	if err := bfp.EncodeTile(bfp.BFP4, &src, tile); err != nil {
		panic(err)
	}
	fmt.Printf("tile bytes: %d\n", len(tile))
	fmt.Printf("exponent of group 0: %#x (step %v)\n", tile[0], bfp.Step(bfp.BFP4, tile[0]))
	fmt.Printf("codes of group 0: % X\n", tile[64:72])

	var dst [1024]float32
	if err := bfp.DecodeTile(bfp.BFP4, tile, &dst); err != nil {
		panic(err)
	}
	fmt.Println("decoded:", dst[:16])
	// Output:
	// tile bytes: 576
	// exponent of group 0: 0x7d (step 0.0625)
	// codes of group 0: B5 21 0D 94 A3 06 5F A1
	// decoded: [0.3125 -0.1875 0.0625 0.125 -0.3125 0 0.25 -0.0625 0.1875 -0.125 0.375 0 -0.4375 0.3125 0.0625 -0.125]
}

// Pack a Hugging Face weight [out, in] = [2, 3] in BFP8. It is stored
// transposed and zero-padded to one 32×32 tile: W[o][i] is tile row i,
// column o.
func ExamplePackMatrix() {
	w := []float32{
		1, 2, 3, // o = 0
		-4, 5.5, 0.25, // o = 1
	}
	data, err := bfp.PackMatrix(bfp.BFP8, w, 2, 3)
	if err != nil {
		panic(err)
	}
	fmt.Println("bytes:", len(data), "=", bfp.NumTiles(2, 3), "tile")

	tile, row, col := bfp.TileOf(1, 2, 2) // W[1][2]
	g, lane := bfp.GroupLane(row, col)
	fmt.Printf("W[1][2]: tile %d row %d col %d, group %d lane %d, exponent %d, code %#x\n",
		tile, row, col, g, lane, data[g], data[64+16*g+lane])

	back, err := bfp.UnpackMatrix(bfp.BFP8, data, 2, 3)
	if err != nil {
		panic(err)
	}
	fmt.Println("unpacked:", back)
	// Output:
	// bytes: 1088 = 1 tile
	// W[1][2]: tile 0 row 2 col 1, group 2 lane 1, exponent 128, code 0x8
	// unpacked: [1 2 3 -4 5.5 0.25]
}

// Quantize one group and decode it; the exponent is the largest exponent
// field, and 0.001 is too small to survive next to 3.0 in BFP4.
func ExampleQuantizeGroup() {
	vals := [16]float32{3, 1, -0.5, 0.001}
	e, codes := bfp.QuantizeGroup(bfp.BFP4, &vals)
	var dec [16]float32
	bfp.DequantizeGroup(bfp.BFP4, e, &codes, &dec)
	fmt.Println("E:", e, "codes:", codes[:4], "decoded:", dec[:4])
	// Output:
	// E: 128 codes: [6 2 9 0] decoded: [3 1 -0.5 0]
}

// Assemble a weight row by row, in any order, as GPTQ does: row k of the
// stored matrix holds input index k of every output channel.
func ExampleBuilder() {
	const out, in = 3, 2
	w := []float32{ // Hugging Face [out, in]
		1, -1,
		2, 0.5,
		-3, 0.25,
	}
	b, err := bfp.NewBuilder(bfp.BFP8, out, in)
	if err != nil {
		panic(err)
	}
	for _, k := range []int{1, 0} {
		row := []float32{w[0*in+k], w[1*in+k], w[2*in+k]}
		if err := b.EncodeRow(k, row); err != nil {
			panic(err)
		}
	}
	direct, _ := bfp.PackMatrix(bfp.BFP8, w, out, in)
	fmt.Println("same bytes as PackMatrix:", string(b.Bytes()) == string(direct))
	// Output:
	// same bytes as PackMatrix: true
}
