package k8s_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/hapsuper/hapsuper/status"
	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// controllerUID is the controller image's USER (chart 0.16.1 sets no
// runAsUser): the uid the harness runs the controller as.
const controllerUID = 99

// The real haproxy-ingress controller v0.16.1 and hapsuper in one pod, as
// chart 0.16.1 with deploy/haproxy-ingress's values and post-renderer
// runs them: the controller as uid 99 with its own token, hapsuper with
// the post-renderer's token (0400, root), HAProxy's master as root and its
// workers as the image's user haproxy (uid 99), the chart's scratch
// volume and the post-renderer's master sockets; the ServiceAccount has
// the chart's RBAC plus the post-renderer's grants, nothing else. Two
// replicas (node1, node2); an Ingress routes to a backend Service. The
// controller's first reload and two more after Ingress edits land over the
// controller's master socket (hapsuper logs each `ok`); clients on both
// nodes go through the ingress Service's ClusterIP; node1's pod is
// deleted: no request fails, its drain ends routed-away, hapsuper exits 0,
// and HAProxy's workers could not read hapsuper's token.
func TestHAProxyIngress_RealController(t *testing.T) {
	ie := startIngress(t)
	a := ie.pods[0]
	tr := startTraffic(t, ie.url, ie.e.H.Nodes(), nil)
	for i, timeout := range []string{"31s", "32s"} {
		ie.editIngress(t, timeout)
		for _, p := range ie.pods {
			p.waitReloads(t, i+2)
		}
	}
	a.checkTokenIsolation(t)
	a.logAdminSocket(t)

	a.controller.Signal(syscall.SIGTERM) // the kubelet stops both containers
	r := a.hap.drainUnder(t, tr, true)
	checkNoFailures(t, tr, time.Time{})
	checkReason(t, r, "routed-away")
	a.checkReloadsBefore(t, r, 3)
	a.checkNoReloadWarnings(t)
}

// The same pods, with an Ingress edit while hapsuper drains: the
// controller (kept running, as with a preStop wait on its container)
// reloads HAProxy during the drain. Nothing fails, the drain ends
// routed-away, and no reload lands after the soft stop.
func TestHAProxyIngress_EditDuringDrain(t *testing.T) {
	ie := startIngress(t)
	a := ie.pods[0]
	tr := startTraffic(t, ie.url, ie.e.H.Nodes(), nil)
	time.Sleep(time.Second)
	a.hap.terminate(t)
	ie.editIngress(t, "33s")
	r := a.hap.afterStop(t, tr, true)
	a.controller.Signal(syscall.SIGTERM)
	checkNoFailures(t, tr, time.Time{})
	checkReason(t, r, "routed-away")
	if during := a.checkReloadsBefore(t, r, 2); during == 0 {
		t.Error("no controller reload landed during the drain: the scenario did not test one")
	}
}

// The same pods through a reload storm (reloadstorm_test.go): an Ingress
// edit every 2 s from before the stop request until hapsuper exits, the
// controller (kept running, as with a preStop wait on its container)
// reloading HAProxy each time, while kube-proxy falls back to the deleted
// pod for 8 s because the other pod is not Ready. Nothing fails, at least
// three reloads land in the drain, none moves the quiet clock, and the
// drain ends routed-away within the withdrawn quiet period + 0.5 s of the
// later of the last request the pod forwarded and routing's withdrawal.
func TestHAProxyIngress_ReloadsEveryTwoSeconds(t *testing.T) {
	backend := &arrivals{}
	ie := startIngressWith(t, backend.handler("web-0"))
	a, b := ie.pods[0], ie.pods[1]
	run := filepath.Join(a.dirs.Volumes["hapsuper-run"], "status.sock")
	s := storm{
		e: ie.e, url: ie.url, backend: backend, draining: a.hap, other: b.hap.Pod, grace: ingressGrace,
		edit:    func(i int) error { return ie.patchTimeout(fmt.Sprintf("%ds", 30+i%20)) },
		reloads: a.reloadsOK,
		status:  func() (status.Snapshot, error) { return fetchStatus(run) },
	}
	s.run(t)
	a.controller.Signal(syscall.SIGTERM)
}

// ingressGrace is the chart's terminationGracePeriodSeconds with
// deploy/haproxy-ingress's values (HAPSUPER_GRACE_PERIOD).
const ingressGrace = 60 * time.Second

// ingressEnv is the cluster with the chart's objects, the backend and the
// ingress pods.
type ingressEnv struct {
	e    *drainEnv
	pods []*ingressPod // haproxy-ingress-0 on node1, haproxy-ingress-1 on node2
	url  string        // the ingress Service's ClusterIP
}

// ingressPod is one running pod of the chart.
type ingressPod struct {
	e          *drainEnv
	hap        *hapPod
	controller *harness.Process
	dirs       kube.Dirs
	tokenFile  string // hapsuper's token, as the post-renderer mounts it
}

// startIngress starts a 2-node cluster, the backend (pod web-0 on node2
// behind Service web), an Ingress, the ingress Service and the chart's pod
// on each node; it returns once each controller's first reload landed,
// the pods are Ready and both nodes reach the backend through the ingress
// Service.
func startIngress(t *testing.T) *ingressEnv {
	t.Helper()
	return startIngressWith(t, nil)
}

// startIngressWith is startIngress with the backend's handler (nil: the
// pod's name).
func startIngressWith(t *testing.T, backend http.Handler) *ingressEnv {
	t.Helper()
	cache := ingressControllerCache(t)
	env := kube.NewBareEnv(t, k8stest.Options{Nodes: 2})
	h, dir := env.H, env.Dir
	if err := os.Chmod(dir, 0o755); err != nil { // the controller (uid 99) reads its files below
		t.Fatal(err)
	}
	e := &drainEnv{env}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ns := k8stest.PodNamespace

	r := kube.RenderHAProxyIngressIn(t, ns)
	pod, err := kube.ParseIngressPod(r)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := kube.NewApplier(t, h).ApplyRBAC(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chart %s + post-renderer RBAC applied: %s", kube.HAProxyIngressChart, strings.Join(applied, " "))
	createChartConfigMap(ctx, t, h)

	web := h.AddPod(t, 2, "web-0", map[string]string{"app": "web"})
	web.ServeHTTP(t, 8080, backend)
	if err := h.SetPodReady(ctx, web, true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Service(ctx, "web", false, corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}); err != nil {
		t.Fatal(err)
	}
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"kubernetes.io/ingress.class": "haproxy"}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
		}}}}},
	}
	if _, err := h.Client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := map[string]string{"app.kubernetes.io/name": "haproxy-ingress", "app.kubernetes.io/instance": "haproxy-ingress"}
	svc, err := h.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "haproxy-ingress"},
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ie := &ingressEnv{e: e, url: fmt.Sprintf("http://%s/", svc.Spec.ClusterIP)}
	for i := range 2 {
		ie.pods = append(ie.pods, startIngressPod(ctx, t, e, pod, i+1, fmt.Sprintf("haproxy-ingress-%d", i), sel, cache))
	}
	for _, n := range h.Nodes() {
		waitSeen(t, n, ie.url, 20*time.Second, "web-0")
	}
	return ie
}

// startIngressPod starts the chart's pod name on node: its volumes, its
// haproxy container (hapsuper) and its controller; it returns once the
// controller's first reload landed and the pod is Ready.
func startIngressPod(ctx context.Context, t *testing.T, e *drainEnv, pod kube.IngressPod, node int, name string, labels map[string]string, cache string) *ingressPod {
	t.Helper()
	kp := e.H.AddPod(t, node, name, labels, func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}
	})
	ip := &ingressPod{e: e}
	ip.makeVolumes(ctx, t, pod, kp, cache)
	ip.startHapsuper(t, pod, kp)
	ip.startController(t, pod, kp, cache)
	ip.waitReloads(t, 1)

	// The kubelet's readiness probe, on the chart's port.
	healthz := fmt.Sprintf("http://%s:10253/healthz", kp.IP)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := e.H.Node(node).HTTPClient(2 * time.Second).Get(healthz)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered 200 (last: %v); hapsuper:\n%s\ncontroller:\n%s", healthz, err, ip.hap.Tail(20), ip.controller.Tail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	ip.hap.ready(t)
	return ip
}

// ingressControllerCache returns hack/haproxy-ingress.sh's directory; the
// test skips without it (fails under CI=true).
func ingressControllerCache(t *testing.T) string {
	t.Helper()
	root := os.Getenv("HAPSUPER_HAPROXY_INGRESS_CACHE")
	if root == "" {
		root = "/var/cache/hapsuper/haproxy-ingress"
	}
	dir := filepath.Join(root, kube.HAProxyIngressController)
	_, err1 := os.Stat(filepath.Join(dir, "haproxy-ingress-controller"))
	_, err2 := os.Stat(filepath.Join(dir, "rootfs", "start.sh"))
	if err := cmpErr(err1, err2); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("haproxy-ingress %s: %v (run hack/haproxy-ingress.sh)", kube.HAProxyIngressController, err)
		}
		t.Skipf("haproxy-ingress %s: %v (run hack/haproxy-ingress.sh)", kube.HAProxyIngressController, err)
	}
	return dir
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// createChartConfigMap creates the chart's ConfigMap haproxy-ingress from
// values.yaml's controller.config, as the chart's
// controller-configmap.yaml does.
func createChartConfigMap(ctx context.Context, t *testing.T, h *k8stest.Harness) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kube.DeployDir(t), "haproxy-ingress", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Controller struct {
			Config map[string]string `json:"config"`
		} `json:"controller"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatalf("parse values.yaml: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "haproxy-ingress"}, Data: values.Controller.Config}
	if _, err := h.Client.CoreV1().ConfigMaps(k8stest.PodNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// makeVolumes makes the pod's volumes (kube.IngressDirs) as directories:
// the scratch subPaths with an emptyDir's mode 0777, hapsuper's private
// directory 0700, and each container's projected token with its volume's
// defaultMode. It plays the
// init container (start.sh --init, as uid 99) and the controller's
// start.sh copy of its lua files. It returns each volume's directory.
func (ip *ingressPod) makeVolumes(ctx context.Context, t *testing.T, pod kube.IngressPod, kp *k8stest.Pod, cache string) {
	t.Helper()
	d := kube.IngressDirs(filepath.Join(ip.e.Dir, kp.Name))
	ip.dirs = d
	for key, dir := range d.Volumes {
		mode := os.FileMode(0o755)
		switch {
		case strings.HasPrefix(key, "scratch/"):
			mode = 0o777
		case key == "hapsuper-run":
			mode = 0o700
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"hapsuper-api-access", "kube-api-access"} {
		ip.writeToken(ctx, t, pod, name, d.Volumes[name])
	}
	ip.tokenFile = filepath.Join(d.Volumes["hapsuper-api-access"], "token")

	// The init container: start.sh --init writes the first configuration.
	start, err := os.ReadFile(filepath.Join(cache, "rootfs", "start.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)cat >/etc/haproxy/haproxy.cfg <<EOF\n(.*?)\nEOF\n`).FindSubmatch(start)
	if m == nil {
		t.Fatalf("rootfs/start.sh of %s has no --init configuration: hack/haproxy-ingress.sh's version changed", kube.HAProxyIngressController)
	}
	cfg := filepath.Join(d.Volumes["scratch/etc"], "haproxy.cfg")
	if err := os.WriteFile(cfg, append(m[1], '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	// start.sh's `cp -R /etc/lua /etc/haproxy/`, as the controller's user.
	if out, err := exec.Command("cp", "-R", filepath.Join(cache, "rootfs", "etc", "lua"), d.Volumes["scratch/etc"]).CombinedOutput(); err != nil {
		t.Fatalf("copy lua files: %v: %s", err, out)
	}
	err = filepath.WalkDir(d.Volumes["scratch/etc"], func(p string, _ fs.DirEntry, err error) error {
		if err != nil || p == d.Volumes["scratch/etc"] {
			return err
		}
		return os.Chown(p, controllerUID, controllerUID)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// writeToken writes what a projected ServiceAccount volume holds (token,
// ca.crt, namespace) with the volume's defaultMode, and a kubeconfig
// naming them next to it (the harness has no in-cluster address).
func (ip *ingressPod) writeToken(ctx context.Context, t *testing.T, pod kube.IngressPod, volume, dir string) {
	t.Helper()
	v, ok := pod.Volume(volume)
	if !ok || v.Projected == nil || v.Projected.DefaultMode == nil {
		t.Fatalf("the rendered pod has no projected volume %s with a defaultMode", volume)
	}
	mode := os.FileMode(*v.Projected.DefaultMode)
	h := ip.e.H
	tr, err := h.Client.CoreV1().ServiceAccounts(k8stest.PodNamespace).CreateToken(ctx, "haproxy-ingress",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a token of ServiceAccount haproxy-ingress: %v", err)
	}
	files := map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": h.Config.CAData, "namespace": []byte(k8stest.PodNamespace)}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k8stest"] = &clientcmdapi.Cluster{Server: "https://" + h.APIServer().String(), CertificateAuthority: filepath.Join(dir, "ca.crt")}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{TokenFile: filepath.Join(dir, "token")}
	cfg.Contexts["sa"] = &clientcmdapi.Context{Cluster: "k8stest", AuthInfo: "sa", Namespace: k8stest.PodNamespace}
	cfg.CurrentContext = "sa"
	kc := filepath.Join(filepath.Dir(dir), volume+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(kc, mode); err != nil {
		t.Fatal(err)
	}
}

// startHapsuper runs the haproxy container: the image's ENTRYPOINT
// (`hapsuper --`) with the rendered args, its container paths rewritten to
// the volumes' directories, and the rendered env (downward API values
// filled in as the kubelet does).
func (ip *ingressPod) startHapsuper(t *testing.T, pod kube.IngressPod, kp *k8stest.Pod) {
	t.Helper()
	d := ip.dirs
	mounts, err := d.Mounts(pod.HAProxy)
	if err != nil {
		t.Fatal(err)
	}
	args, err := kube.Rewrite(pod.HAProxy.Args, mounts)
	if err != nil {
		t.Fatal(err)
	}
	run := d.Volumes["hapsuper-run"]
	argv := append([]string{ip.e.Bin,
		"--kubeconfig", filepath.Join(filepath.Dir(run), "hapsuper-api-access.kubeconfig"),
		"--status-socket", filepath.Join(run, "status.sock"),
		"--override-file", filepath.Join(run, "override.cfg"),
		"--"}, args...)
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, v := range pod.HAProxy.Env {
		switch {
		case v.ValueFrom == nil:
			env = append(env, v.Name+"="+v.Value)
		case v.ValueFrom.FieldRef != nil:
			env = append(env, v.Name+"="+fieldValue(t, kp, v.ValueFrom.FieldRef.FieldPath))
		default:
			t.Fatalf("container haproxy: env %s comes from a source the harness does not fill", v.Name)
		}
	}
	// The image's user haproxy is uid 99 (official haproxy images); the
	// host's may not be: the container sees the image's passwd and group.
	passwd, group := imageUserFiles(t, filepath.Dir(run))
	argv = append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$1" /etc/passwd && mount --bind "$2" /etc/group && shift 2 && exec "$@"`, "sh", passwd, group}, argv...)
	if root := os.Getenv("HAPSUPER_INGRESS_HAPROXY_ROOT"); root != "" {
		env[0] = "PATH=" + haproxyRootWrapper(t, root, filepath.Dir(run), passwd, group) + ":/usr/sbin:/usr/bin:/sbin:/bin"
	}
	cmd := kp.Command(context.Background(), argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p, err := harness.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	c := &kube.Container{Pod: kp, Process: p}
	ip.hap = &hapPod{Container: c, e: ip.e, observed: true}
	t.Cleanup(func() {
		if !c.Kill() {
			t.Errorf("hapsuper of %s not reaped 5s after SIGKILL", kp.Name)
		}
		if t.Failed() || os.Getenv("HAPSUPER_K8S_DRAIN_LOG") != "" {
			t.Logf("hapsuper log of %s ends:\n%s", kp.Name, c.Tail(60))
		}
	})
	for _, msg := range []string{"haproxy ready", "routing watch synced"} {
		if _, ok := c.Wait(msg, nil, 45*time.Second, c.Done()); !ok {
			t.Fatalf("no %q in hapsuper's log; log:\n%s", msg, c.Tail(30))
		}
	}
}

// haproxyRootWrapper writes, into dir/bin, a `haproxy` that runs the
// HAProxy of a root made by hack/haproxy-root.sh (HAPSUPER_INGRESS_HAPROXY_ROOT,
// such as /var/cache/hapsuper/haproxy-3.4: the hapsuper image's branch),
// chrooted, with /tmp (the pod's directories), /proc and the image's
// passwd and group mounted in a mount namespace of its own. It returns
// dir/bin.
func haproxyRootWrapper(t *testing.T, root, dir, passwd, group string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "usr/sbin/haproxy")); err != nil {
		t.Fatalf("HAPSUPER_INGRESS_HAPROXY_ROOT: %v (make it with hack/haproxy-root.sh)", err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
exec unshare --mount --propagation private -- /bin/sh -euc '
mount --bind /tmp %[1]q/tmp
mount -t proc proc %[1]q/proc
mount --bind %[2]q %[1]q/etc/passwd
mount --bind %[3]q %[1]q/etc/group
exec chroot %[1]q /usr/sbin/haproxy "$@"' haproxy "$@"
`, root, passwd, group)
	if err := os.WriteFile(filepath.Join(bin, "haproxy"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// imageUserFiles writes the host's passwd and group with user and group
// haproxy as the hapsuper image has them (uid and gid 99) into dir.
func imageUserFiles(t *testing.T, dir string) (string, string) {
	t.Helper()
	var paths []string
	for _, f := range []struct{ name, line string }{
		{"passwd", "haproxy:x:99:99::/var/lib/haproxy:/usr/sbin/nologin"},
		{"group", "haproxy:x:99:"},
	} {
		b, err := os.ReadFile("/etc/" + f.name)
		if err != nil {
			t.Fatal(err)
		}
		lines := []string{f.line}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if !strings.HasPrefix(l, "haproxy:") {
				lines = append(lines, l)
			}
		}
		p := filepath.Join(dir, "image-"+f.name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths[0], paths[1]
}

// fieldValue is what the kubelet puts in a downward-API variable.
func fieldValue(t *testing.T, p *k8stest.Pod, path string) string {
	t.Helper()
	switch path {
	case "metadata.name":
		return p.Name
	case "metadata.namespace":
		return p.Namespace
	case "status.podIPs", "status.podIP":
		return p.IP.String()
	case "spec.nodeName":
		return p.Node.Name
	}
	t.Fatalf("downward API field %s: the harness does not fill it", path)
	return ""
}

// startController runs the controller container as uid 99 with the
// rendered args, its paths rewritten, plus what running outside its image
// takes: --local-filesystem-prefix (the volumes' directories sit under it)
// and its token's kubeconfig. Its working directory holds rootfs/ (its
// templates).
func (ip *ingressPod) startController(t *testing.T, pod kube.IngressPod, kp *k8stest.Pod, cache string) {
	t.Helper()
	d := ip.dirs
	mounts, err := d.Mounts(pod.Controller)
	if err != nil {
		t.Fatal(err)
	}
	args, err := kube.Rewrite(pod.Controller.Args, mounts)
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "--local-filesystem-prefix="+d.Prefix(),
		"--kubeconfig="+filepath.Join(filepath.Dir(d.Volumes["kube-api-access"]), "kube-api-access.kubeconfig"))
	uid := strconv.Itoa(controllerUID)
	argv := append([]string{"setpriv", "--reuid=" + uid, "--regid=" + uid, "--clear-groups", "--",
		filepath.Join(cache, "haproxy-ingress-controller")}, args...)
	cmd := kp.Command(context.Background(), argv[0], argv[1:]...)
	cmd.Dir = cache
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "POD_NAME=" + kp.Name, "POD_NAMESPACE=" + kp.Namespace}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p, err := harness.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	ip.controller = p
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() || os.Getenv("HAPSUPER_K8S_DRAIN_LOG") != "" {
			t.Logf("controller log ends:\n%s", p.Tail(40))
		}
	})
}

// reloadsOK counts hapsuper's "haproxy reloaded" lines for reloads it did
// not send (the controller's, over the master CLI).
func (ip *ingressPod) reloadsOK() []harness.Entry {
	var out []harness.Entry
	for _, l := range ip.hap.All("haproxy reloaded") {
		if l.Str("origin") == "master CLI" {
			out = append(out, l)
		}
	}
	return out
}

// waitReloads waits (bounded: the controller's reload interval and a
// loaded machine) until hapsuper logged n reloads ok.
func (ip *ingressPod) waitReloads(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for len(ip.reloadsOK()) < n {
		if time.Now().After(deadline) || ip.hap.Exited() {
			t.Fatalf("hapsuper logged %d controller reloads ok, want %d; hapsuper:\n%s\ncontroller:\n%s", len(ip.reloadsOK()), n, ip.hap.Tail(30), ip.controller.Tail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, l := range ip.hap.All("reload failed") {
		t.Errorf("hapsuper logged a failed reload: %s", l.Str("why"))
	}
}

// checkReloadsBefore asserts at least n controller reloads ok and none
// after the soft stop; it returns how many came after the stop request.
func (ip *ingressPod) checkReloadsBefore(t *testing.T, r drainRecord, n int) int {
	t.Helper()
	all, during := ip.reloadsOK(), 0
	for _, l := range all {
		if !l.At.Before(r.Soft) {
			t.Errorf("a reload landed %v after the soft stop", l.At.Sub(r.Soft))
		}
		if !l.At.Before(r.term) {
			during++
		}
	}
	if len(all) < n {
		t.Errorf("hapsuper logged %d controller reloads ok, want at least %d", len(all), n)
	}
	t.Logf("controller reloads logged ok: %d (%d after the stop request)", len(all), during)
	return during
}

// editIngress changes the Ingress's backend timeout: a configuration
// change the controller applies by a reload.
func (ie *ingressEnv) editIngress(t *testing.T, timeout string) {
	t.Helper()
	if err := ie.patchTimeout(timeout); err != nil {
		t.Fatal(err)
	}
}

// patchTimeout is editIngress without the test, for a goroutine.
func (ie *ingressEnv) patchTimeout(timeout string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"haproxy-ingress.github.io/timeout-server":%q}}}`, timeout)
	_, err := ie.e.H.Client.NetworkingV1().Ingresses(k8stest.PodNamespace).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// checkTokenIsolation: the controller runs as uid 99; HAProxy's master as
// root and its workers as uid 99 without capabilities; the workers'
// credentials cannot read hapsuper's token, root can (the check of
// test/integration's TestSecurity_WorkersCannotReadToken, on this pod).
func (ip *ingressPod) checkTokenIsolation(t *testing.T) {
	t.Helper()
	if s := procFields(t, ip.controller.Pid()); strings.Fields(s["Uid"])[0] != strconv.Itoa(controllerUID) {
		t.Errorf("controller Uid %q: want %d", s["Uid"], controllerUID)
	}
	masters := childrenOf(t, ip.hap.Pid(), "haproxy")
	if len(masters) != 1 {
		t.Fatalf("hapsuper has %d haproxy children, want the master", len(masters))
	}
	if s := procFields(t, masters[0]); strings.Fields(s["Uid"])[0] != "0" {
		t.Errorf("HAProxy master Uid %q: want root", s["Uid"])
	}
	workers := childrenOf(t, masters[0], "haproxy")
	if len(workers) == 0 {
		t.Fatal("HAProxy's master has no worker")
	}
	uid := strconv.Itoa(controllerUID)
	for _, w := range workers {
		s := procFields(t, w)
		if s["Uid"] != strings.Repeat(uid+"\t", 3)+uid || strings.Trim(s["CapEff"], "0") != "" {
			t.Errorf("worker %d: Uid %q CapEff %s: want uid %d four times and no capability", w, s["Uid"], s["CapEff"], controllerUID)
		}
	}
	out, err := exec.Command("setpriv", "--reuid="+uid, "--regid="+uid, "--clear-groups", "cat", ip.tokenFile).CombinedOutput()
	t.Logf("cat %s as the workers' uid %s: %v %q", filepath.Base(ip.tokenFile), uid, err, strings.TrimSpace(string(out)))
	if err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Errorf("the workers' uid read hapsuper's token: %v", err)
	}
	if b, err := os.ReadFile(ip.tokenFile); err != nil || len(b) == 0 {
		t.Errorf("root (hapsuper) cannot read its token: %v", err)
	}
}

// logAdminSocket logs who owns the admin socket HAProxy binds from the
// controller's configuration and how often the controller failed to use
// it: HAProxy (2.6, 3.0, 3.4) applies neither unix-bind's user nor its
// mode to a `stats socket`, so with a root master it stays root's and the
// controller's dynamic updates and idle metric fail (deploy/haproxy-ingress/README.md).
func (ip *ingressPod) logAdminSocket(t *testing.T) {
	t.Helper()
	p := filepath.Join(ip.dirs.Volumes["scratch/run"], "admin.sock")
	fi, err := os.Stat(p)
	if err != nil {
		t.Errorf("the admin socket: %v", err)
		return
	}
	t.Logf("admin.sock uid %d mode %04o; the controller failed %d times to use it", fi.Sys().(*syscall.Stat_t).Uid, fi.Mode().Perm(),
		strings.Count(ip.controller.String(), "error reading admin socket"))
}

// checkNoReloadWarnings: the configuration the controller wrote with
// values.yaml's keys has what hapsuper's drain asks for: hapsuper, which
// inspects it after each reload, does not warn.
func (ip *ingressPod) checkNoReloadWarnings(t *testing.T) {
	t.Helper()
	for _, l := range ip.hap.All("config warning") {
		t.Errorf("hapsuper warns (after %q) about the controller's configuration: %s", l.Str("after"), l.Str("warning"))
	}
}

// procFields reads /proc/<pid>/status.
func procFields(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read status of %d: %v", pid, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// childrenOf lists the processes named name whose parent is pid.
func childrenOf(t *testing.T, pid int, name string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			continue
		}
		var n string
		var pp int
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Name:"); ok {
				n = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				pp, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if n == name && pp == pid {
			out = append(out, p)
		}
	}
	return out
}
