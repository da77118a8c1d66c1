package bounded

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

func TestRead(t *testing.T) {
	if b, err := Read(strings.NewReader("abcd"), 4); err != nil || string(b) != "abcd" {
		t.Errorf("at the limit: %q, %v", b, err)
	}
	var big *TooLargeError
	if _, err := Read(strings.NewReader("abcde"), 4); !errors.As(err, &big) || big.Size != -1 || big.Limit != 4 {
		t.Errorf("over the limit: %v", err)
	}
	boom := errors.New("boom")
	if _, err := Read(iotest.ErrReader(boom), 4); err != boom {
		t.Errorf("a failing reader: %v, want its error as it is", err)
	}
	if b, err := ReadSized(strings.NewReader("abc"), 10, 3); err != nil || string(b) != "abc" {
		t.Errorf("sized: %q, %v", b, err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, read := range []func(string, int64) ([]byte, error){ReadFile, ReadRegularFile} {
		if b, err := read(p, 5); err != nil || string(b) != "hello" {
			t.Errorf("%q, %v", b, err)
		}
		var big *TooLargeError
		if _, err := read(p, 4); !errors.As(err, &big) || big.Size != 5 || big.Name != p {
			t.Errorf("over the limit: %v", err)
		}
		if _, err := read(filepath.Join(dir, "none"), 5); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing: %v", err)
		}
	}
	var nr *NotRegularError
	if _, err := ReadRegularFile(dir, 5); !errors.As(err, &nr) || nr.Name != dir {
		t.Errorf("a directory: %v", err)
	}
	var re *ReadError
	if _, err := ReadFile(dir, 5); !errors.As(err, &re) {
		t.Errorf("reading a directory: %v, want a ReadError", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if b, err := ReadRootFile(root, "f", 5); err != nil || string(b) != "hello" {
		t.Errorf("root: %q, %v", b, err)
	}
	var big *TooLargeError
	if _, err := ReadRootFile(root, "f", 4); !errors.As(err, &big) || big.Name != "f" {
		t.Errorf("root, over the limit: %v", err)
	}
	if _, err := ReadRootFile(root, "../f", 5); err == nil {
		t.Error("a path out of the root was read")
	}
}
