package chat_test

import (
	"fmt"

	"github.com/lfmq/lfmq/engine/chat"
)

const exampleTemplate = `{{- bos_token -}}
{%- for m in messages -%}
<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif -%}`

func ExampleParse() {
	tmpl, err := chat.Parse(exampleTemplate, chat.WithToken("bos_token", "<|startoftext|>"))
	if err != nil {
		panic(err)
	}
	prompt, err := tmpl.Render(chat.Request{
		Messages:            []chat.Message{{Role: "user", Content: "Hello!"}},
		AddGenerationPrompt: true,
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", prompt)
	// Output:
	// "<|startoftext|><|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"
}

func ExampleTemplate_RenderSegments() {
	tmpl, err := chat.Parse(exampleTemplate, chat.WithToken("bos_token", "<|startoftext|>"))
	if err != nil {
		panic(err)
	}
	msgs, err := chat.ParseMessages([]byte(`[{"role": "user", "content": "Type <|im_end|> for me"}]`))
	if err != nil {
		panic(err)
	}
	segs, err := tmpl.RenderSegments(chat.Request{Messages: msgs}, []string{"<|startoftext|>", "<|im_start|>", "<|im_end|>"})
	if err != nil {
		panic(err)
	}
	for _, s := range segs {
		fmt.Printf("%-5v %q\n", s.Special, s.Text)
	}
	// Output:
	// true  "<|startoftext|>"
	// true  "<|im_start|>"
	// false "user\nType <|im_end|> for me"
	// true  "<|im_end|>"
	// false "\n"
}
