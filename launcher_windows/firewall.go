package launcherwindows

import (
	"crypto/sha256"
	"fmt"
)

// The Windows Filtering Platform objects `sandboxd install` adds, once and
// persistent: fixed identifiers, so installing again finds and replaces
// them and uninstalling removes exactly them.
const (
	FirewallProviderID   = "{63f267de-7896-42d4-ba77-ca535977818e}"
	FirewallProviderName = "sandboxd"
	FirewallSublayerID   = "{14387a03-4007-4de9-9e94-8ba21357af8a}"
	FirewallSublayerName = "sandboxd network NONE"
	// FirewallSublayerWeight puts the sublayer above every other: a block
	// from it is not overridden by a permit that another product's
	// sublayer evaluates first.
	FirewallSublayerWeight uint16 = 0xFFFF
)

// The ALE layers a network NONE token is blocked at: connect (and the
// first datagram of UDP), accepting, listening, and binding a port, each
// for IPv4 and IPv6.
const (
	LayerALEAuthConnectV4        = "ALE_AUTH_CONNECT_V4"
	LayerALEAuthConnectV6        = "ALE_AUTH_CONNECT_V6"
	LayerALEAuthRecvAcceptV4     = "ALE_AUTH_RECV_ACCEPT_V4"
	LayerALEAuthRecvAcceptV6     = "ALE_AUTH_RECV_ACCEPT_V6"
	LayerALEAuthListenV4         = "ALE_AUTH_LISTEN_V4"
	LayerALEAuthListenV6         = "ALE_AUTH_LISTEN_V6"
	LayerALEResourceAssignmentV4 = "ALE_RESOURCE_ASSIGNMENT_V4"
	LayerALEResourceAssignmentV6 = "ALE_RESOURCE_ASSIGNMENT_V6"
)

var firewallLayers = []string{
	LayerALEAuthConnectV4, LayerALEAuthConnectV6,
	LayerALEAuthRecvAcceptV4, LayerALEAuthRecvAcceptV6,
	LayerALEAuthListenV4, LayerALEAuthListenV6,
	LayerALEResourceAssignmentV4, LayerALEResourceAssignmentV6,
}

// FirewallAction is the action of every filter sandboxd adds.
const FirewallAction = "block"

// FirewallFilters are the persistent filters that take the network away
// from every token of the offline user and from every token carrying
// NetworkNoneSID, loopback included: they have no condition but the user.
// Named pipes are not IP, so the daemon's pipes stay reachable.
func FirewallFilters(offlineSID string) []Filter {
	sddl := firewallUserSDDL(offlineSID)
	out := make([]Filter, 0, len(firewallLayers))
	for _, layer := range firewallLayers {
		out = append(out, Filter{
			Layer:    layer,
			Action:   FirewallAction,
			UserSDDL: sddl,
			ID:       filterID(layer),
			Name:     "sandboxd: no network for network NONE sandboxes (" + layer + ")",
		})
	}
	return out
}

// firewallUserSDDL is what the ALE user condition matches a token against:
// FWP_ACTRL_MATCH_FILTER (CC) granted to the offline user and to
// NetworkNoneSID.
func firewallUserSDDL(offlineSID string) string {
	return "D:(A;;CC;;;" + offlineSID + ")(A;;CC;;;" + NetworkNoneSID + ")"
}

// filterID is a GUID derived from the layer's name: a version 8 (RFC 9562,
// here SHA-256 of the name) UUID, so that it is the same on every host.
func filterID(layer string) string {
	h := sha256.Sum256([]byte("sandboxd-filter:" + layer))
	h[6] = h[6]&0x0f | 0x80
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("{%x-%x-%x-%x-%x}", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
