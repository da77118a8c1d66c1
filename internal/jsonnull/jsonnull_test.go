package jsonnull

import (
	"encoding/json"
	"testing"
)

func TestNulls(t *testing.T) {
	b, err := json.Marshal([]any{Size(-1), Size(0), Size(7), String(""), String("ab")})
	if err != nil || string(b) != `[null,0,7,null,"ab"]` {
		t.Errorf("got %s, %v", b, err)
	}
}
