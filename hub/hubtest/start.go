package hubtest

import (
	"net/http/httptest"
	"testing"
)

// Start serves s for the test tb: its LFS storage on one test server (whose
// URL becomes s.StorageURL) and the hub on another, whose base URL it
// returns. Both close when the test ends, which then fails if the storage
// host ever received an Authorization header: the hub's token must not
// leave the hub.
func Start(tb testing.TB, s *Server) string {
	tb.Helper()
	// The storage first: its URL is configuration the hub reads.
	storage := httptest.NewServer(s.Storage())
	s.StorageURL = storage.URL
	hub := httptest.NewServer(s)
	tb.Cleanup(func() {
		hub.Close()
		storage.Close()
		if leaks := s.Leaks(); len(leaks) > 0 {
			tb.Errorf("the storage host received an Authorization header: %v", leaks)
		}
	})
	return hub.URL
}
