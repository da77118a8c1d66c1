package parser_test

import (
	"fmt"

	"github.com/lfmq/lfmq/engine/parser"
)

func ExampleParser() {
	p := parser.New(parser.Options{Reasoning: true, Tools: true})
	var evs []parser.Event
	evs = append(evs, p.Marker(parser.ThinkStart)...)
	evs = append(evs, p.Text("The user wants a sum.")...)
	evs = append(evs, p.Marker(parser.ThinkEnd)...)
	evs = append(evs, p.Text("\n\n")...)
	evs = append(evs, p.Marker(parser.ToolCallStart)...)
	evs = append(evs, p.Text(`[calculate(expression="619 + 419")]`)...)
	evs = append(evs, p.Marker(parser.ToolCallEnd)...)
	evs = append(evs, p.Finish()...)
	for _, e := range evs {
		if e.Kind == parser.KindToolCall {
			fmt.Println(e.Kind, e.Call.Name, e.Call.Arguments)
		} else {
			fmt.Printf("%v %q\n", e.Kind, e.Text)
		}
	}
	// Output:
	// reasoning "The user wants a sum."
	// tool_call calculate {"expression":"619 + 419"}
}

func ExampleParseToolCalls() {
	calls, ok := parser.ParseToolCalls(`[search(query='café <b>', limit=010, ratio=1e-5, tags=('a',), exact=True)]`)
	fmt.Println(ok, calls[0].Name, calls[0].Arguments)
	// Output:
	// true search {"query":"café <b>","limit":10,"ratio":1e-05,"tags":["a"],"exact":true}
}

func ExampleStopMatcher() {
	m := parser.NewStopMatcher([]string{"###"})
	for _, piece := range []string{"Answer: 42 #", "## ignored"} {
		emit, stopped := m.Add(piece)
		fmt.Printf("%q %v\n", emit, stopped)
		if stopped {
			break
		}
	}
	// Output:
	// "Answer: 42 " false
	// "" true
}
