package check

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing"
)

// The areas that need the API, for the rows that say why they were skipped.
var clusterAreas = []string{AreaIdentity, AreaGrants, AreaPaths, AreaKubeProxy}

func skipAreas(r *Report, areas []string, why string) {
	for _, a := range areas {
		r.add(a, "-", Skip, "skipped: "+why, "")
	}
}

// clusterRows checks what the routing mode needs of the cluster: the
// credentials, the apiserver, the mode auto would pick, the pod's identity
// and grace period, the grants, the paths to the pod, and kube-proxy.
func clusterRows(ctx context.Context, r *Report, in Input) {
	s := in.Settings
	mode := s.Routing
	if mode == conf.RoutingOff {
		r.add(AreaRouting, "mode", Skip, "skipped: routing off (--routing off): drains end on the quiet period alone", "")
		skipAreas(r, clusterAreas, "routing off")
		return
	}
	explicit := mode != conf.RoutingAuto
	// What auto does without credentials or identity: it runs off.
	missing := Fail
	if !explicit {
		missing = Warn
	}
	if in.Client == nil && s.Kubeconfig != "" {
		r.add(AreaRouting, "credentials", Fail, fmt.Sprintf("--kubeconfig %s cannot be read: %v; run refuses to start with it", s.Kubeconfig, in.ClientErr), "fix the path or drop --kubeconfig")
		skipAreas(r, clusterAreas, "no credentials")
		return
	}
	if in.Client == nil {
		detail := fmt.Sprintf("--routing %s needs in-cluster credentials or --kubeconfig: %v", mode, in.ClientErr)
		if !explicit {
			detail = fmt.Sprintf("no in-cluster credentials and no --kubeconfig (%v): --routing auto runs with routing off, and drains end on the quiet period alone", in.ClientErr)
		}
		r.add(AreaRouting, "credentials", missing, detail, "run check in the pod (kubectl exec) or give --kubeconfig; or set --routing off to say so")
		skipAreas(r, clusterAreas, "no credentials")
		return
	}
	id, err := routing.IdentityFromEnv(in.Getenv)
	if err != nil {
		r.add(AreaIdentity, "downward API", missing, err.Error(), "add POD_NAME, POD_NAMESPACE, NODE_NAME and POD_IPS to the container's env from the downward API (deploy/base/deployment.yaml)")
		skipAreas(r, clusterAreas[1:], "no pod identity")
		return
	}
	v, err := serverVersion(ctx, in.Client)
	if err != nil {
		r.add(AreaRouting, "apiserver", Fail, "unreachable: "+err.Error(), "check the credentials' server address and that the pod may reach the apiserver (NetworkPolicy)")
		skipAreas(r, clusterAreas, "apiserver unreachable")
		return
	}
	r.add(AreaRouting, "apiserver", OK, "reachable, Kubernetes "+v, "")
	effective := routing.Mode(mode)
	if !explicit {
		pctx, cancel := context.WithTimeout(ctx, apiTimeout)
		picked, why := routing.PickMode(pctx, in.Client, id, s.KubeProxyHealthzPort)
		cancel()
		effective = picked
		if picked == routing.ModeKubeProxy {
			r.add(AreaRouting, "mode", OK, "auto picks kube-proxy: "+why, "")
		} else {
			r.add(AreaRouting, "mode", Warn, "auto picks "+string(picked)+": "+why+"; drains then end "+string(drain.ReasonWithdrawnInAPI)+", kube-proxy not observed",
				"grant list on nodes (deploy/overlays/kube-proxy) and let the pod reach the nodes' kube-proxy healthz, or set --routing endpointslices to say so")
		}
	} else {
		r.add(AreaRouting, "mode", OK, "--routing "+mode, "")
	}

	pctx, cancel := context.WithTimeout(ctx, apiTimeout)
	pod, podErr := in.Client.GetPod(pctx, id.Namespace, id.PodName)
	cancel()
	if podErr != nil {
		pod = nil
	}
	identityRows(r, id, pod, podErr)
	if pod != nil {
		graceRow(r, s, pod)
	}
	grantRows(ctx, r, in.Client, id, effective)
	pathRows(ctx, r, in.Client, id, pod, s.LBHealthCheckWindow)
	if effective != routing.ModeKubeProxy {
		r.add(AreaKubeProxy, "-", Skip, "skipped: routing "+string(effective)+" does not ask kube-proxy", "")
		return
	}
	kubeProxyRows(ctx, r, in.Client, s.KubeProxyHealthzPort)
	kubeProxyMetricsRows(ctx, r, in.Client, s.KubeProxyMetricsPort)
}

// serverVersion asks the apiserver its version: whether it answers at all.
func serverVersion(ctx context.Context, client API) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	v, err := client.ServerVersion(ctx)
	if err != nil {
		return "", err
	}
	if v.GitVersion == "" {
		return "(version unknown)", nil
	}
	return v.GitVersion, nil
}

// identityRows compares the downward-API variables with the pod as the API
// has it.
func identityRows(r *Report, id routing.Identity, pod *corev1.Pod, err error) {
	subject := "pod " + id.Namespace + "/" + id.PodName
	switch {
	case apierrors.IsNotFound(err):
		r.add(AreaIdentity, subject, Fail, "no such pod: POD_NAME or POD_NAMESPACE is not this pod's",
			"set them from the downward API (fieldRef metadata.name, metadata.namespace)")
		return
	case apierrors.IsForbidden(err):
		r.add(AreaIdentity, subject, Fail, "cannot read the pod: "+err.Error(), "grant get and watch on pods (deploy/overlays/endpointslices/rbac.yaml)")
		return
	case err != nil:
		r.add(AreaIdentity, subject, Fail, "get pod: "+err.Error(), "check that the apiserver answers")
		return
	}
	ok := true
	if pod.Spec.NodeName != id.NodeName {
		r.add(AreaIdentity, "NODE_NAME", Fail, fmt.Sprintf("%q, but the pod runs on node %q", id.NodeName, pod.Spec.NodeName),
			"set NODE_NAME from the downward API (fieldRef spec.nodeName)")
		ok = false
	}
	if want, got := podIPs(pod), canonical(id.PodIPs); !slices.Equal(want, got) {
		r.add(AreaIdentity, "POD_IPS", Fail, fmt.Sprintf("%s, but the pod's IPs are %s", strings.Join(got, ","), orNone(want)),
			"set POD_IPS from the downward API (fieldRef status.podIPs)")
		ok = false
	}
	if ok {
		r.add(AreaIdentity, subject, OK, fmt.Sprintf("POD_NAME, POD_NAMESPACE, NODE_NAME and POD_IPS match the pod: node %s, IPs %s", pod.Spec.NodeName, strings.Join(podIPs(pod), ",")), "")
	}
}

// podIPs are the pod's IPs, canonical and sorted.
func podIPs(pod *corev1.Pod) []string {
	var ips []string
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = []string{pod.Status.PodIP}
	}
	return canonical(ips)
}

func canonical(ips []string) []string {
	out := make([]string, 0, len(ips))
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil {
			s = a.Unmap().String()
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func orNone(ss []string) string {
	if len(ss) == 0 {
		return "none yet"
	}
	return strings.Join(ss, ",")
}

// graceRow compares --grace-period with the pod's
// terminationGracePeriodSeconds.
func graceRow(r *Report, s conf.Settings, pod *corev1.Pod) {
	podGrace := 30 * time.Second // the API's default
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		podGrace = time.Duration(*g) * time.Second
	}
	fix := fmt.Sprintf("set --grace-period (HAPSUPER_GRACE_PERIOD) to %v, the pod's terminationGracePeriodSeconds", podGrace)
	switch {
	case s.GracePeriod > podGrace:
		r.add(AreaSettings, "grace period", Fail, fmt.Sprintf("--grace-period %v is longer than the pod's terminationGracePeriodSeconds %v: the kubelet's SIGKILL can come before hapsuper's deadline", s.GracePeriod, podGrace), fix)
	case s.GracePeriod < podGrace:
		r.add(AreaSettings, "grace period", Warn, fmt.Sprintf("--grace-period %v is shorter than the pod's terminationGracePeriodSeconds %v: drains stop sooner than they could", s.GracePeriod, podGrace), fix)
	default:
		r.add(AreaSettings, "grace period", OK, fmt.Sprintf("%v, the pod's terminationGracePeriodSeconds", podGrace), "")
	}
}
