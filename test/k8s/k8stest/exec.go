package k8stest

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// Exec runs command in a container of a pod through the apiserver, the
// kubelet and the container runtime's exec (CRI), as `kubectl exec` does,
// and returns its standard output and error. A command that exits non-zero
// returns an error that says so, with what it printed.
func (h *Harness) Exec(ctx context.Context, namespace, pod, container string, command ...string) (stdout, stderr string, err error) {
	req := h.Client.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container, Command: command, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(h.Config, "POST", req.URL())
	if err != nil {
		return "", "", fmt.Errorf("exec %v in pod %s/%s: %w", command, namespace, pod, err)
	}
	var out, errOut bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	if err != nil {
		return out.String(), errOut.String(), fmt.Errorf("exec %v in pod %s/%s: %w (stderr: %q)", command, namespace, pod, err, errOut.String())
	}
	return out.String(), errOut.String(), nil
}
