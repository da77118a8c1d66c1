package publish_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/lfmq/lfmq/hub/publish"
)

// Publish a verified release directory under its revision tag, creating
// the repository when needed. (Not run: it talks to the real hub.)
func ExamplePublish() {
	res, err := publish.Publish(context.Background(), publish.Options{
		Repo: "owner/LFM2-8B-A1B-lfmq1", Revision: "v1", Dir: "release", Create: true,
		Token: os.Getenv("HF_TOKEN"),
		Progress: publish.Progress{
			Done: func(path string, o publish.Outcome) { fmt.Fprintf(os.Stderr, "%-9s %s\n", o, path) },
		},
	})
	var stale *publish.StaleError
	switch {
	case errors.As(err, &stale):
		fmt.Println(err) // someone committed meanwhile: run again
	case err != nil:
		fmt.Println(err)
	case res.UpToDate:
		fmt.Println("already published at", res.CommitURL)
	default:
		fmt.Printf("published %d files (%d bytes) at %s\n", len(res.Uploaded), res.UploadedBytes, res.CommitURL)
	}
}
