package check

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/routing"
	"github.com/hapsuper/hapsuper/routing/kube"
)

// API is the apiserver as check asks it: routing's requests, the pod, the
// server's version and SelfSubjectAccessReviews. *kube.Client is the real
// one.
type API interface {
	routing.API
	ServerVersion(ctx context.Context) (*version.Info, error)
	CreateSelfSubjectAccessReview(ctx context.Context, sar *authorizationv1.SelfSubjectAccessReview) (*authorizationv1.SelfSubjectAccessReview, error)
}

var _ API = (*kube.Client)(nil)

// Input is what a check looks at: the settings `run` would take, the
// environment (the pod's downward-API variables), and a Kubernetes client
// built as `run` builds it.
type Input struct {
	Settings conf.Settings
	Getenv   func(string) string
	// Client is nil when there are no credentials; ClientErr says why.
	Client    API
	ClientErr error
}

// apiTimeout bounds each API call of a check.
const apiTimeout = 5 * time.Second

// Run checks everything and returns the rows. It takes at most a few
// API timeouts plus one healthz round; it never panics on what the cluster
// answers.
func Run(ctx context.Context, in Input) Report {
	var r Report
	configRows(ctx, &r, in.Settings)
	settingsRow(&r, in.Settings)
	clusterRows(ctx, &r, in)
	return r
}

// SettingsFailed is the report of settings that `run` refuses: one FAIL
// row with the error, which says what to change.
func SettingsFailed(err error) Report {
	var r Report
	r.add(AreaSettings, "flags and environment", Fail, err.Error(), "change the flag or HAPSUPER_* variable the error names")
	return r
}

// settingsRow shows the drain's times; Parse has already checked that they
// fit together (quiet period within max wait, max wait within the budget).
func settingsRow(r *Report, s conf.Settings) {
	r.add(AreaSettings, "times", OK, fmt.Sprintf(
		"grace-period %v − margin %v = stop budget %v; max-wait %v; quiet-period %v, %v once routing is withdrawn",
		s.GracePeriod, s.Margin, s.Budget(), s.MaxWait.Round(time.Millisecond), s.QuietPeriod, s.WithdrawnQuietText()), "")
}

// NewInput reads the settings' credentials as `run` does (--kubeconfig,
// else the pod's service account), with every request bounded by
// apiTimeout. Without credentials Client is nil and ClientErr says why.
func NewInput(s conf.Settings, getenv func(string) string) Input {
	in := Input{Settings: s, Getenv: getenv}
	if s.Routing == conf.RoutingOff {
		return in
	}
	cfg, err := routing.RESTConfig(s.Kubeconfig)
	if err != nil {
		in.ClientErr = err
		return in
	}
	cfg.UserAgent = "hapsuper-check"
	cfg.Timeout = apiTimeout
	client, err := kube.NewForConfig(cfg)
	if err != nil {
		in.ClientErr = err
		return in
	}
	in.Client = client
	return in
}
