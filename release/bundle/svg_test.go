package bundle

import "testing"

func TestSVGTitle(t *testing.T) {
	for _, tt := range []struct {
		name, svg, want string
	}{
		{"title element", `<svg><text>axis</text><title>KL per token</title></svg>`, "KL per token"},
		{"first text", `<svg><text x="1">KL(BF16 &#8214; candidate) per token: chat</text><text>1e-9</text></svg>`, "KL(BF16 ‖ candidate) per token: chat"},
		{"nested and spread over lines", "<svg><text>KL <tspan>per\n  token</tspan></text></svg>", "KL per token"},
		{"empty title, text", `<svg><title> </title><text>from text</text></svg>`, "from text"},
		{"none", `<svg><rect/></svg>`, ""},
		{"malformed after text", `<svg><text>kept</text><g`, "kept"},
		{"not xml", `not an svg`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := svgTitle([]byte(tt.svg)); got != tt.want {
				t.Errorf("svgTitle = %q, want %q", got, tt.want)
			}
		})
	}
}
