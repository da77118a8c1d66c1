// Package hubhttp holds the retry rules that every client of a Hugging
// Face style hub in lfmq follows (which answers are worth another try,
// and how long to wait before it), so that the download of a release
// (package download), the filling of the Hugging Face cache (package
// hfcache, through download and publish) and publishing (package publish)
// answer a hub the same way.
//
// It is a leaf: it knows statuses and waits, not the hub's API, its paths
// or its errors (package publish reads those), and it sends nothing.
package hubhttp
