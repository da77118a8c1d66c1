package tokenizer

// The GPT-2 byte-to-unicode alphabet used by the ByteLevel pre-tokenizer and
// decoder: every byte is shown as one printable character. Bytes that are
// already printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
// themselves; the other 68 bytes, in increasing order, take U+0100, U+0101,
// ... (so the space 0x20 is 'Ġ', U+0120, and '\n' is 'Ċ', U+010A).
var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	next := rune(256)
	for b := 0; b < 256; b++ {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelDecode maps a token string of the byte-level alphabet back to the
// bytes it stands for. ok is false if some character is outside the
// alphabet (the Hugging Face decoder then keeps the token's own UTF-8).
func byteLevelDecode(tok string) (b []byte, ok bool) {
	b = make([]byte, 0, len(tok))
	for _, r := range tok {
		c, in := runeToByte[r]
		if !in {
			return nil, false
		}
		b = append(b, c)
	}
	return b, true
}
