package conformance

import "testing"

// linuxMeta has nothing to add on macOS.
func linuxMeta(*testing.T, string) string { return "" }

// metaDenials checks nothing on macOS: Seatbelt reports refusals in its
// own words, which observe_darwin_test.go checks.
func metaDenials(*testing.T, *session, ...denialWant) {}

func linuxMetadataCases() []conformanceCase { return nil }
