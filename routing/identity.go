package routing

import (
	"fmt"
	"net/netip"
	"strings"
)

// Identity is who this pod is, as the downward API tells it.
type Identity struct {
	PodName   string   // POD_NAME: fieldRef metadata.name
	Namespace string   // POD_NAMESPACE: fieldRef metadata.namespace
	NodeName  string   // NODE_NAME: fieldRef spec.nodeName
	PodIPs    []string // POD_IPS: fieldRef status.podIPs, a comma list
}

// identityEnv maps each variable to the downward API field that fills it.
var identityEnv = []struct{ name, fieldPath string }{
	{"POD_NAME", "metadata.name"},
	{"POD_NAMESPACE", "metadata.namespace"},
	{"NODE_NAME", "spec.nodeName"},
	{"POD_IPS", "status.podIPs"},
}

// IdentityFromEnv reads the pod's identity from the downward API variables
// POD_NAME, POD_NAMESPACE, NODE_NAME and POD_IPS. The error names every
// missing variable and the fieldRef that sets it.
func IdentityFromEnv(getenv func(string) string) (Identity, error) {
	var missing []string
	for _, v := range identityEnv {
		if strings.TrimSpace(getenv(v.name)) == "" {
			missing = append(missing, fmt.Sprintf("%s (valueFrom.fieldRef.fieldPath: %s)", v.name, v.fieldPath))
		}
	}
	if len(missing) > 0 {
		return Identity{}, fmt.Errorf("read pod identity: missing %s: set them in the container's env with the downward API",
			strings.Join(missing, ", "))
	}
	id := Identity{
		PodName:   strings.TrimSpace(getenv("POD_NAME")),
		Namespace: strings.TrimSpace(getenv("POD_NAMESPACE")),
		NodeName:  strings.TrimSpace(getenv("NODE_NAME")),
	}
	for _, s := range strings.Split(getenv("POD_IPS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			id.PodIPs = append(id.PodIPs, s)
		}
	}
	if _, err := id.addrs(); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// validate says what is missing or malformed in an Identity.
func (id Identity) validate() error {
	switch {
	case id.PodName == "":
		return fmt.Errorf("check pod identity: no pod name (POD_NAME)")
	case id.Namespace == "":
		return fmt.Errorf("check pod identity: no namespace (POD_NAMESPACE)")
	case id.NodeName == "":
		return fmt.Errorf("check pod identity: no node name (NODE_NAME)")
	}
	_, err := id.addrs()
	return err
}

// addrs parses PodIPs. EndpointSlices hold canonical addresses; comparing
// parsed addresses also matches a non-canonical spelling of an IPv6 address.
func (id Identity) addrs() ([]netip.Addr, error) {
	if len(id.PodIPs) == 0 {
		return nil, fmt.Errorf("check pod identity: no pod IP (POD_IPS, fieldRef status.podIPs)")
	}
	out := make([]netip.Addr, 0, len(id.PodIPs))
	for _, s := range id.PodIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("check pod identity: parse pod IP %q from POD_IPS: %w", s, err)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}
