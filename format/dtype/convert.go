package dtype

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/x448/float16"
)

// BF16ToFloat32 returns the float32 whose bit pattern is b<<16. The widening
// is exact: every bfloat16 value, NaN payloads included, is a float32 value.
func BF16ToFloat32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// Float32ToBF16 rounds f to the nearest bfloat16, ties to even, and returns
// its bit pattern. Values beyond the largest finite bfloat16 round to ±Inf as
// IEEE 754 prescribes. A NaN stays a NaN with the same sign and the top of its
// payload, and comes back quiet: dropping the low payload bits could otherwise
// turn a signalling NaN with a low-only payload into an infinity.
func Float32ToBF16(f float32) uint16 {
	x := math.Float32bits(f)
	if x&0x7fffffff > 0x7f800000 {
		return uint16(x>>16) | 0x0040
	}
	// Adding 0x7fff rounds half down; adding the kept LSB as well turns
	// exact halves into round-to-even. A carry into the exponent is the
	// correct result (including overflow to Inf).
	x += 0x7fff + (x>>16)&1
	return uint16(x >> 16)
}

// F16ToFloat32 returns the float32 value of the IEEE 754 binary16 bit
// pattern h. The widening is exact; a NaN comes back quiet.
func F16ToFloat32(h uint16) float32 {
	e := h & 0x7c00
	if e != 0 && e != 0x7c00 {
		// A normal number: rebias the exponent by 127-15 = 112.
		return math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + 112<<23))
	}
	return float16.Frombits(h).Float32()
}

// Float32ToF16 rounds f to the nearest IEEE 754 binary16, ties to even, and
// returns its bit pattern. Overflow gives ±Inf, a NaN stays a quiet NaN.
func Float32ToF16(f float32) uint16 {
	return float16.Fromfloat32(f).Bits()
}

// ToFloat32 decodes the little-endian elements of type d in src into dst.
// It supports BF16, F16, F32, I32 and U8 (see Convertible); len(src) must be
// exactly len(dst)*d.Size(). Integers convert to the nearest float32, so I32
// values beyond ±2^24 may round.
func ToFloat32(d DType, src []byte, dst []float32) error {
	if !d.Convertible() {
		return unsupported("ToFloat32", d)
	}
	if err := checkLen("ToFloat32", d, len(src), len(dst)); err != nil {
		return err
	}
	switch d {
	case BF16:
		decodeBF16(dst, src)
	case F16:
		decodeF16(dst, src)
	case F32:
		decodeF32(dst, src)
	case I32:
		decodeI32(dst, src)
	case U8:
		decodeU8(dst, src)
	}
	return nil
}

// FromFloat32 encodes src as little-endian elements of type d and returns the
// new bytes. It supports BF16, F16 and F32; BF16 and F16 round to nearest,
// ties to even.
func FromFloat32(d DType, src []float32) ([]byte, error) {
	if !encodable(d) {
		return nil, unsupported("FromFloat32", d)
	}
	dst := make([]byte, len(src)*d.Size())
	encode(d, dst, src)
	return dst, nil
}

// PutFloat32 is FromFloat32 into a caller's buffer: it encodes src into dst,
// which must be exactly len(src)*d.Size() bytes long.
func PutFloat32(d DType, dst []byte, src []float32) error {
	if !encodable(d) {
		return unsupported("PutFloat32", d)
	}
	if err := checkLen("PutFloat32", d, len(dst), len(src)); err != nil {
		return err
	}
	encode(d, dst, src)
	return nil
}

func encodable(d DType) bool {
	return d == BF16 || d == F16 || d == F32
}

func unsupported(op string, d DType) error {
	if d.Size() == 0 {
		return &Error{Op: op, DType: d, Msg: fmt.Sprintf("unknown dtype %q", string(d)), Err: ErrUnknown}
	}
	return &Error{Op: op, DType: d, Msg: fmt.Sprintf("%s is not supported", d), Err: ErrUnsupported}
}

// checkLen checks that nbytes bytes hold exactly n elements of d. It divides
// rather than multiplies so that no length can overflow.
func checkLen(op string, d DType, nbytes, n int) error {
	size := d.Size()
	if nbytes%size != 0 || nbytes/size != n {
		return &Error{Op: op, DType: d, Err: ErrLength,
			Msg: fmt.Sprintf("%d bytes of %s do not hold %d elements of %d bytes", nbytes, d, n, size)}
	}
	return nil
}

func encode(d DType, dst []byte, src []float32) {
	switch d {
	case BF16:
		encodeBF16(dst, src)
	case F16:
		encodeF16(dst, src)
	case F32:
		encodeF32(dst, src)
	}
}

// The kernels below assume checked lengths: len(src) == len(dst)*size for
// decoders and len(dst) == len(src)*size for encoders. Their main loops read
// or write eight bytes at a time through binary.LittleEndian, which the
// compiler turns into single loads and stores on little-endian machines.

// decodeBF16 widens pairs of bytes: dst[i] = BF16ToFloat32(src[2i] | src[2i+1]<<8).
func decodeBF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		v := binary.LittleEndian.Uint64(src[2*i:])
		d := (*[4]float32)(dst[i:])
		d[0] = math.Float32frombits(uint32(v) << 16)
		d[1] = math.Float32frombits(uint32(v) & 0xffff0000)
		d[2] = math.Float32frombits(uint32(v>>32) << 16)
		d[3] = math.Float32frombits(uint32(v>>32) & 0xffff0000)
	}
	for ; i < len(dst); i++ {
		dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// f16Table maps every binary16 pattern to its float32 bits. 256 KiB, built
// on first use: a lookup has no data-dependent branch, which matters because
// subnormals and specials take a slow path in F16ToFloat32.
var f16Table = sync.OnceValue(func() *[1 << 16]uint32 {
	t := new([1 << 16]uint32)
	for i := range t {
		t[i] = math.Float32bits(F16ToFloat32(uint16(i)))
	}
	return t
})

// decodeF16 is dst[i] = F16ToFloat32(src[2i] | src[2i+1]<<8).
func decodeF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	i := 0
	if len(dst) >= 1024 {
		t := f16Table()
		for ; i+4 <= len(dst); i += 4 {
			v := binary.LittleEndian.Uint64(src[2*i:])
			d := (*[4]float32)(dst[i:])
			d[0] = math.Float32frombits(t[uint16(v)])
			d[1] = math.Float32frombits(t[uint16(v>>16)])
			d[2] = math.Float32frombits(t[uint16(v>>32)])
			d[3] = math.Float32frombits(t[uint16(v>>48)])
		}
	}
	for ; i+4 <= len(dst); i += 4 {
		v := binary.LittleEndian.Uint64(src[2*i:])
		d := (*[4]float32)(dst[i:])
		d[0] = F16ToFloat32(uint16(v))
		d[1] = F16ToFloat32(uint16(v >> 16))
		d[2] = F16ToFloat32(uint16(v >> 32))
		d[3] = F16ToFloat32(uint16(v >> 48))
	}
	for ; i < len(dst); i++ {
		dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// decodeF32 is dst[i] = Float32frombits(little-endian uint32 at src[4i:]).
func decodeF32(dst []float32, src []byte) {
	src = src[:4*len(dst)]
	i := 0
	for ; i+2 <= len(dst); i += 2 {
		v := binary.LittleEndian.Uint64(src[4*i:])
		d := (*[2]float32)(dst[i:])
		d[0] = math.Float32frombits(uint32(v))
		d[1] = math.Float32frombits(uint32(v >> 32))
	}
	for ; i < len(dst); i++ {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

// decodeI32 is dst[i] = float32(int32(little-endian uint32 at src[4i:])).
func decodeI32(dst []float32, src []byte) {
	src = src[:4*len(dst)]
	i := 0
	for ; i+2 <= len(dst); i += 2 {
		v := binary.LittleEndian.Uint64(src[4*i:])
		d := (*[2]float32)(dst[i:])
		d[0] = float32(int32(uint32(v)))
		d[1] = float32(int32(uint32(v >> 32)))
	}
	for ; i < len(dst); i++ {
		dst[i] = float32(int32(binary.LittleEndian.Uint32(src[4*i:])))
	}
}

// decodeU8 is dst[i] = float32(src[i]).
func decodeU8(dst []float32, src []byte) {
	src = src[:len(dst)]
	for i, b := range src {
		dst[i] = float32(b)
	}
}

// encodeBF16 is little-endian dst[2i:] = Float32ToBF16(src[i]).
func encodeBF16(dst []byte, src []float32) {
	dst = dst[:2*len(src)]
	i := 0
	for ; i+4 <= len(src); i += 4 {
		s := (*[4]float32)(src[i:])
		v := uint64(Float32ToBF16(s[0])) |
			uint64(Float32ToBF16(s[1]))<<16 |
			uint64(Float32ToBF16(s[2]))<<32 |
			uint64(Float32ToBF16(s[3]))<<48
		binary.LittleEndian.PutUint64(dst[2*i:], v)
	}
	for ; i < len(src); i++ {
		binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBF16(src[i]))
	}
}

// encodeF16 is little-endian dst[2i:] = Float32ToF16(src[i]).
func encodeF16(dst []byte, src []float32) {
	dst = dst[:2*len(src)]
	for i, f := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], Float32ToF16(f))
	}
}

// encodeF32 is little-endian dst[4i:] = Float32bits(src[i]).
func encodeF32(dst []byte, src []float32) {
	dst = dst[:4*len(src)]
	i := 0
	for ; i+2 <= len(src); i += 2 {
		s := (*[2]float32)(src[i:])
		v := uint64(math.Float32bits(s[0])) | uint64(math.Float32bits(s[1]))<<32
		binary.LittleEndian.PutUint64(dst[4*i:], v)
	}
	for ; i < len(src); i++ {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(src[i]))
	}
}
