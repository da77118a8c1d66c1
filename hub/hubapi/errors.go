package hubapi

import (
	"fmt"
	"net/http"
)

// Every message below starts with "publish: " (the package this client
// came from: a publish's texts are kept as they were), or with "hub: "
// when Reading is set: an error of a read for a command that publishes
// nothing (a Remote's: a model or dataset given by its hub id).

// prefix starts a message: "hub: " for a read, "publish: " otherwise.
func prefix(reading bool) string {
	if reading {
		return "hub: "
	}
	return "publish: "
}

// HubError is an answer of the hub (or of the storage its LFS actions
// point at) that ends an operation. URL has no query string (upload URLs
// carry signatures there) and no message ever holds the token.
type HubError struct {
	// Op names the step: "repo info", "tree" (reads), or one of package
	// publish's: "create repo", "preupload", "lfs batch", "upload",
	// "upload part", "complete multipart", "lfs verify", "commit", "tag".
	Op     string
	Method string
	URL    string
	Status int
	// Code is the hub's X-Error-Code (RepoNotFound, RevisionNotFound,
	// EntryNotFound, …), when it sent one.
	Code string
	// Message is the hub's explanation: X-Error-Message and the JSON
	// body's error, errors[].message or message, deduplicated.
	Message string
	// RequestID is the hub's X-Request-Id, when sent.
	RequestID string
	// Reading is set for a Remote's request (see prefix).
	Reading bool
}

func (e *HubError) Error() string {
	s := fmt.Sprintf("%s%s: %s %s: HTTP %d %s", prefix(e.Reading), e.Op, e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " (request id " + e.RequestID + ")"
	}
	return s
}

// NetError is a request that got no answer (connection refused or cut,
// timeout) after every retry.
type NetError struct {
	Op, Method, URL string
	Err             error
	// Reading is set for a Remote's request (see prefix).
	Reading bool
}

func (e *NetError) Error() string {
	return fmt.Sprintf("%s%s: %s %s: %v", prefix(e.Reading), e.Op, e.Method, e.URL, e.Err)
}

func (e *NetError) Unwrap() error { return e.Err }

// ProtocolError is an answer the client cannot use: malformed JSON, a
// missing field, an object that was not asked for.
type ProtocolError struct {
	Op, URL string
	Msg     string
	// Reading is set for a Remote's request (see prefix).
	Reading bool
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("%s%s: %s: unexpected answer: %s", prefix(e.Reading), e.Op, e.URL, e.Msg)
}

// RepoNotFoundError reports a repository the hub does not have (or does
// not show to this token): to a Remote, or to a publish without
// --create (package publish's Options.Create).
type RepoNotFoundError struct {
	Endpoint, Repo string
	// Err is the hub's answer.
	Err error
	// Reading is set when the repository was to be read (Remote), where
	// creating it is no remedy.
	Reading bool
}

func (e *RepoNotFoundError) Error() string {
	if e.Reading {
		return fmt.Sprintf("hub: repository %s does not exist on %s (or this token cannot see it)", e.Repo, e.Endpoint)
	}
	return fmt.Sprintf("publish: repository %s does not exist on %s (or this token cannot see it); pass --create to create it", e.Repo, e.Endpoint)
}

func (e *RepoNotFoundError) Unwrap() error { return e.Err }
