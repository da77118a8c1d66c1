package tokenizer

import "unicode"

// Oniguruma, the regular expression engine behind Hugging Face's Split
// pre-tokenizer, uses newer Unicode data (characters assigned in Unicode
// 15.1 and 16.0) than Go's unicode package (Unicode 15.0.0). These tables
// hold the code points that Hugging Face tokenizers 0.23.2 classes as
// \p{L} (onigLetters) or \p{N} (onigNumbers) while Go's tables class them
// as neither. They were measured, not copied: every code point that
// Node's ICU (Unicode 17) classes differently from Go was run through that
// library's pre-tokenizer ("a"+c and "1"+c stay one piece exactly for a
// letter and a number). If Go's tables catch up, the entries are
// redundant, not wrong.

var onigLetters = &unicode.RangeTable{
	R16: []unicode.Range16{
		{0x1c89, 0x1c8a, 1},
		{0xa7cb, 0xa7cd, 1},
		{0xa7da, 0xa7dc, 1},
	},
	R32: []unicode.Range32{
		{0x105c0, 0x105f3, 1},
		{0x10d4a, 0x10d65, 1},
		{0x10d6f, 0x10d85, 1},
		{0x10ec2, 0x10ec4, 1},
		{0x11380, 0x11389, 1},
		{0x1138b, 0x1138b, 1},
		{0x1138e, 0x1138e, 1},
		{0x11390, 0x113b5, 1},
		{0x113b7, 0x113b7, 1},
		{0x113d1, 0x113d1, 1},
		{0x113d3, 0x113d3, 1},
		{0x11bc0, 0x11be0, 1},
		{0x13460, 0x143fa, 1},
		{0x16100, 0x1611d, 1},
		{0x16d40, 0x16d6c, 1},
		{0x18cff, 0x18cff, 1},
		{0x1e5d0, 0x1e5ed, 1},
		{0x1e5f0, 0x1e5f0, 1},
		{0x2ebf0, 0x2ee5d, 1},
	},
}

var onigNumbers = &unicode.RangeTable{
	R32: []unicode.Range32{
		{0x10d40, 0x10d49, 1},
		{0x116d0, 0x116e3, 1},
		{0x11bf0, 0x11bf9, 1},
		{0x16130, 0x16139, 1},
		{0x16d70, 0x16d79, 1},
		{0x1ccf0, 0x1ccf9, 1},
		{0x1e5f1, 0x1e5fa, 1},
	},
}
