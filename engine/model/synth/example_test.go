package synth_test

import (
	"context"
	"fmt"
	"os"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/model/synth"
)

// Write a tiny synthetic checkpoint and run a prompt through it.
func ExampleWrite() {
	dir, err := os.MkdirTemp("", "synth-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	res, err := synth.Write(context.Background(), dir, synth.Options{Shape: synth.TinyShape(), Seed: 1})
	if err != nil {
		panic(err)
	}
	m, err := load.Load(dir, load.Options{Threads: 1})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	logits, err := m.Forward(context.Background(), []*model.Sequence{m.NewSequence()}, [][]int{{1, 2, 3}}, model.ForwardOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(res.Files), "files,", res.Config.NumLayers, "layers,", len(logits[0]), "logits")
	// Output: 7 files, 4 layers, 512 logits
}
