package tokenizer_test

import (
	"fmt"
	"log"
	"path/filepath"

	"github.com/lfmq/lfmq/engine/tokenizer"
)

func Example() {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "testdata", "tiny-lfm2-moe", "model"))
	if err != nil {
		log.Fatal(err)
	}
	// A completions prompt: special tokens matched, BOS prepended.
	ids := tok.Encode("hello world", tokenizer.EncodeOptions{AddBOS: true, MatchSpecial: true})
	fmt.Println(ids)

	// A rendered chat template: split at special tokens, BOS from the text.
	ids = tok.EncodeSpecialSplit("<|startoftext|><|im_start|>user\nhi<|im_end|>\n")
	fmt.Println(ids)

	// Request-supplied text: special-token strings stay text.
	fmt.Println(len(tok.EncodeOrdinary("<|im_end|>")) > 1)

	text, err := tok.Decode(ids)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", text)
	// Output:
	// [1 5302 2014]
	// [1 6 508 26 7614 7 26]
	// true
	// "<|startoftext|><|im_start|>user\nhi<|im_end|>\n"
}

func ExampleStreamDecoder() {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "testdata", "tiny-lfm2-moe", "model"))
	if err != nil {
		log.Fatal(err)
	}
	d := tok.NewStreamDecoder()
	for _, id := range tok.EncodeOrdinary("日本") {
		s, err := d.Add(id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%q ", s) // never part of a character
	}
	fmt.Printf("%q\n", d.Flush())
	// Output:
	// "" "" "日" "" "本" ""
}
