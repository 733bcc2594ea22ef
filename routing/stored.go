package routing

import (
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// storedSlice is what the slice informer's store and the watch keep of an
// EndpointSlice: the fields of a trimmed slice, without the EndpointSlice
// and ObjectMeta structs around them (~350 bytes per slice however little
// they hold, the largest part of a trimmed slice; 10,000 slices in a big
// namespace). The verdict reads the EndpointSlice it expands to.
type storedSlice struct {
	name, namespace, resourceVersion string
	labels                           map[string]string // shared, read-only
	addressType                      discovery.AddressType
	ports                            []discovery.EndpointPort // shared, read-only
	endpoints                        []discovery.Endpoint
}

// storeSlice keeps what trim kept of s.
func storeSlice(s *discovery.EndpointSlice) *storedSlice {
	return &storedSlice{
		name: s.Name, namespace: s.Namespace, resourceVersion: s.ResourceVersion,
		labels: s.Labels, addressType: s.AddressType, ports: s.Ports, endpoints: s.Endpoints,
	}
}

// GetObjectMeta gives the informer's store its key (namespace/name) and
// the resource version: a stored slice is an object to client-go's
// meta.Accessor.
func (s *storedSlice) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: s.name, Namespace: s.namespace, ResourceVersion: s.resourceVersion}
}

// slice is the trimmed EndpointSlice s was stored from. It shares s's
// labels, ports and endpoints, which nothing writes.
func (s *storedSlice) slice() *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: s.name, Namespace: s.namespace, ResourceVersion: s.resourceVersion, Labels: s.labels},
		AddressType: s.addressType,
		Ports:       s.ports,
		Endpoints:   s.endpoints,
	}
}

// service is the Service the slice belongs to.
func (s *storedSlice) service() string { return s.labels[judge.LabelServiceName] }

// expandSlices expands a Service's stored slices for judge.Service.
func expandSlices(stored []*storedSlice) []*discovery.EndpointSlice {
	out := make([]*discovery.EndpointSlice, len(stored))
	for i, s := range stored {
		out[i] = s.slice()
	}
	return out
}
