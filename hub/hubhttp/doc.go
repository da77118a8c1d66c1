// Package hubhttp holds the HTTP rules that every client of a Hugging Face
// style hub in lfmq follows, so that the download of a release (package
// download), the filling of the Hugging Face cache (package hfcache) and
// publishing (package publish) answer a hub the same way.
//
// It is a leaf: it knows statuses, not the hub's API, its paths or its
// errors (package publish reads those), and it sends nothing.
package hubhttp
