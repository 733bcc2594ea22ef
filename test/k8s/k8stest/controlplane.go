package k8stest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const serviceCIDR = "10.96.0.0/16"

// firstServiceIP is the kubernetes Service's address; the serving
// certificate names it.
var firstServiceIP = netip.MustParseAddr("10.96.0.1")

// apiserverURL is where nodes and the test reach the apiserver: the host's
// address on the fabric, not loopback.
func (h *Harness) apiserverURL() string {
	return "https://" + netip.AddrPortFrom(h.slot.hostIP(), uint16(h.slot.apiserverPort())).String()
}

// startControlPlane starts etcd, kube-apiserver and kube-controller-manager
// and waits until the apiserver is ready.
func (h *Harness) startControlPlane() error {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	began := time.Now()
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(h.slot.etcdPort())
	peerURL := "http://127.0.0.1:" + strconv.Itoa(h.slot.etcdPeerPort())
	var err error
	h.etcd, err = startProcess("etcd", h.path("etcd.log"), []string{
		filepath.Join(h.bin, "etcd"),
		"--name=hs", "--data-dir=" + h.path("etcd-data"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=hs=" + peerURL,
		"--unsafe-no-fsync", "--log-level=warn",
	})
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, h.etcd, http.DefaultClient, etcdURL+"/health"); err != nil {
		return err
	}
	etcdAt := time.Now()

	host := h.slot.hostIP().String()
	h.apiserverArgv = []string{
		filepath.Join(h.bin, "kube-apiserver"),
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + host, "--advertise-address=" + host,
		"--secure-port=" + strconv.Itoa(h.slot.apiserverPort()),
		"--tls-cert-file=" + h.pki.ServingCert, "--tls-private-key-file=" + h.pki.ServingKey,
		"--client-ca-file=" + h.pki.CA,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + h.pki.SAPublic,
		"--service-account-signing-key-file=" + h.pki.SAPrivate,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=RBAC",
		"--profiling=false",
		// exec and logs reach a kubelet (Options.KubeletNode) at the
		// node's fabric address, with the admin certificate.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate=" + h.pki.AdminCert, "--kubelet-client-key=" + h.pki.AdminKey,
	}
	h.apiserver, err = startProcess("kube-apiserver", h.path("kube-apiserver.log"), h.apiserverArgv)
	if err != nil {
		return err
	}
	h.Config = &rest.Config{
		Host: h.apiserverURL(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData: h.pki.caPEM, CertData: h.pki.adminCertPEM, KeyData: h.pki.adminKeyPEM,
		},
		QPS: 100, Burst: 200,
		Timeout: 30 * time.Second,
	}
	if err := h.waitAPIServer(ctx, h.apiserver); err != nil {
		return err
	}
	apiserverAt := time.Now()
	// The test's requests outlast an apiserver restart (RestartAPIServer):
	// one the apiserver could not be dialled for is sent again.
	h.Config.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return dialRetry{rt} }
	if h.Client, err = kubernetes.NewForConfig(h.Config); err != nil {
		return fmt.Errorf("build apiserver client: %w", err)
	}

	kubeconfig := h.path("admin.kubeconfig")
	if err := writeKubeconfig(kubeconfig, h.apiserverURL(), h.pki.CA, h.pki.AdminCert, h.pki.AdminKey); err != nil {
		return err
	}
	h.controllerManager, err = startProcess("kube-controller-manager", h.path("kube-controller-manager.log"), []string{
		filepath.Join(h.bin, "kube-controller-manager"),
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + h.controllers(),
		"--root-ca-file=" + h.pki.CA, // published as kube-root-ca.crt (KubeletNode)
		"--leader-elect=false", "--use-service-account-credentials=false",
		"--secure-port=0",
	})
	if err != nil {
		return err
	}
	h.t.Logf("k8stest: etcd healthy in %v, kube-apiserver ready %v later",
		etcdAt.Sub(began).Round(time.Millisecond), apiserverAt.Sub(etcdAt).Round(time.Millisecond))
	return nil
}

// waitAPIServer waits until p, the apiserver, answers /readyz.
func (h *Harness) waitAPIServer(ctx context.Context, p *Process) error {
	cfg := rest.CopyConfig(h.Config)
	cfg.WrapTransport = nil
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("build apiserver client: %w", err)
	}
	return waitHTTP(ctx, p, httpClient, h.apiserverURL()+"/readyz")
}

// RestartAPIServer stops kube-apiserver (SIGTERM, SIGKILL after 10 s) and
// starts it again on the same etcd, appending to its log, and returns once
// it is ready: every watch breaks and every client must reconnect, as on a
// control-plane upgrade. The harness's own Client resends what it could not
// dial meanwhile (up to 60 s); hapsuper's client has no such help.
func (h *Harness) RestartAPIServer(ctx context.Context) error {
	h.apiMu.Lock()
	defer h.apiMu.Unlock()
	if err := h.apiserver.Stop(10 * time.Second); err != nil {
		return fmt.Errorf("stop kube-apiserver: %w", err)
	}
	p, err := startProcess("kube-apiserver", h.path("kube-apiserver.log"), h.apiserverArgv)
	if err != nil {
		return err
	}
	h.apiserver = p
	return h.waitAPIServer(ctx, p)
}

// dialRetry sends a request again when the apiserver could not be dialled
// (so the request never left): every 100 ms for up to 60 s, within the
// request's context.
type dialRetry struct{ next http.RoundTripper }

func (d dialRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := d.next.RoundTrip(req)
		var op *net.OpError
		if err == nil || !errors.As(err, &op) || op.Op != "dial" || time.Now().After(deadline) {
			return resp, err
		}
		if req.Body != nil {
			if req.GetBody == nil {
				return resp, err
			}
			body, berr := req.GetBody()
			if berr != nil {
				return resp, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
		select {
		case <-req.Context().Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// controllers are the controller-manager's controllers: with a real
// kubelet, Deployments run, and projected service-account volumes need the
// kube-root-ca.crt ConfigMap in every namespace.
func (h *Harness) controllers() string {
	if h.Options.KubeletNode != 0 {
		return "endpointslice,serviceaccount,deployment,replicaset,root-ca-cert-publisher"
	}
	return "endpointslice,serviceaccount"
}

// waitDefaultServiceAccount waits for the serviceaccount controller to make
// default/default: pods are refused until it exists.
func (h *Harness) waitDefaultServiceAccount(ctx context.Context) error {
	return poll(ctx, 100*time.Millisecond, func() (bool, error) {
		if err := h.controllerManager.Err(); err != nil {
			return false, fmt.Errorf("kube-controller-manager exited: %v; its log ends:\n%s", err, h.controllerManager.LogTail(20))
		}
		_, err := h.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// waitHTTP polls url until it answers 200, failing early when p exits.
func waitHTTP(ctx context.Context, p *Process, client *http.Client, url string) error {
	var last string
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		if err := p.Err(); err != nil {
			return false, fmt.Errorf("%s exited: %v; its log ends:\n%s", p.Name, err, p.LogTail(20))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s at %s (last answer: %s): %w", p.Name, url, last, err)
	}
	return nil
}

// poll calls check every interval until it reports done or an error, or ctx
// ends.
func poll(ctx context.Context, interval time.Duration, check func() (bool, error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
