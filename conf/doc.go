// Package conf holds hapsuper's settings: the `run` command's flags and their
// environment variables, the HAProxy command line built from them, a read-only
// inspection of the user's HAProxy configuration, and the override file that
// bounds every soft stop.
//
// It must not rewrite, reformat or save the user's HAProxy configuration (the
// parser is used to read only: rewriting breaks `.if` blocks), must not exit or
// print, and must not start processes: it returns values and errors that say
// what to change.
//
// Every flag can also be set from the environment; a flag given on the command
// line wins over its variable. An empty variable counts as unset.
//
//   - HAPSUPER_GRACE_PERIOD (--grace-period, default 30s): the pod's
//     terminationGracePeriodSeconds. It must match the pod spec: hapsuper cannot
//     see it and the kubelet sends SIGKILL when it ends.
//   - HAPSUPER_MARGIN (--margin, default 2s): the safety margin before the
//     kubelet's SIGKILL. The stop deadline is stop request + grace − margin;
//     grace − margin is the stop budget.
//   - HAPSUPER_MAX_WAIT (--max-wait, default two thirds of the stop budget): the
//     longest the drain holds the listeners open before the soft stop, so the
//     soft stop keeps at least a third of the budget. Must be less than the
//     budget.
//   - HAPSUPER_QUIET_PERIOD (--quiet-period, default 2s): how long the counted
//     frontends must see no new request or connection. Must be less than the
//     max wait.
//   - HAPSUPER_WITHDRAWN_QUIET_PERIOD (--withdrawn-quiet-period, default the
//     quiet period): once routing is observed withdrawn, how long the counted
//     frontends must see no new connection (requests on open connections do
//     not count where the soft stop is graceful). At most the quiet period.
//   - HAPSUPER_POLL_INTERVAL (--poll-interval, default 100ms, at least 10ms):
//     how often HAProxy's counters are read over the master CLI while HAProxy
//     starts and from the stop request on; while it serves, every second
//     (or this interval when longer). Must be less than the quiet period.
//   - HAPSUPER_IGNORE_FRONTENDS (--ignore-frontends, default none): a comma
//     separated list of frontends whose traffic does not reset the quiet period
//     (probes, stats). Every name must exist in the configuration.
//   - HAPSUPER_MASTER_SOCKET (--master-socket, default
//     /var/run/hapsuper/master.sock): the master CLI socket passed to HAProxy
//     as -S. When the HAProxy command already has -S, its address is used.
//   - HAPSUPER_STATUS_SOCKET (--status-socket, default
//     /var/run/hapsuper/status.sock): hapsuper's own status socket.
//   - HAPSUPER_OVERRIDE_FILE (--override-file, default
//     /var/run/hapsuper/override.cfg): the configuration file hapsuper writes
//     and passes to HAProxy as the last -f (hard-stop-after = the stop budget).
//   - HAPSUPER_STOP_SIGNALS (--stop-signals, default SIGTERM,SIGUSR1): the
//     signals that start the drain; names with or without SIG, any case, or
//     numbers. SIGKILL, SIGSTOP and SIGCHLD are refused.
//   - HAPSUPER_LOG_FORMAT (--log-format, default text): text or json.
//   - HAPSUPER_LOG_LEVEL (--log-level, default info): debug, info, warn or error.
//   - HAPSUPER_ROUTING (--routing, default auto): how routing withdrawal is
//     observed: off (quiet period only), endpointslices (the pod's
//     EndpointSlices in the API), kube-proxy (and every node's kube-proxy
//     healthz), or auto: with in-cluster credentials or a kubeconfig,
//     kube-proxy when nodes can be listed and this node's kube-proxy
//     answers healthz with per-family status (1.33+), else endpointslices;
//     without credentials off. What auto picked and why is logged.
//   - HAPSUPER_KUBECONFIG (--kubeconfig, default none): a kubeconfig file for
//     use outside a cluster; in a pod the service account is used.
//   - HAPSUPER_KUBE_PROXY_HEALTHZ_PORT (--kube-proxy-healthz-port, default
//     10256): kube-proxy's healthz port on every node, for --routing kube-proxy.
//   - HAPSUPER_KUBE_PROXY_MIN_SYNC_PERIOD (--kube-proxy-min-sync-period,
//     default 1s, at least 500ms): the cluster's kube-proxy minSyncPeriod, or
//     more. The confirmation rule waits this long for a sync that would carry
//     the change before it trusts an earlier one; a value below the
//     cluster's may confirm early.
//   - HAPSUPER_KUBE_PROXY_SYNC_ALLOWANCE (--kube-proxy-sync-allowance,
//     default 250ms, at least 10ms): how late kube-proxy may get a change
//     after hapsuper plus how long one of its rule syncs takes. A sync that
//     completed at least this long after hapsuper received the change holds
//     it. Size it from kube-proxy's
//     kubeproxy_sync_proxy_rules_duration_seconds p99 plus the apiserver
//     watch lag; with the 100ms hapsuper allows its own watch to lag, it
//     must fit in --kube-proxy-min-sync-period. Larger only delays
//     confirmation.
//   - HAPSUPER_LB_DEREGISTRATION_DELAY (--lb-deregistration-delay, default
//     0: none): how long load balancers that target pod IPs keep sending new
//     connections after the pod is deregistered (AWS target group
//     deregistration delay, GCP health check interval × threshold). In the
//     routing modes the drain holds at least this long after the withdrawal
//     (after the stop request when no slice lists the pod). Plus the quiet
//     period it must be less than the max wait.
//   - HAPSUPER_METRICS_ADDR (--metrics-addr, default none: off): the address
//     of the Prometheus endpoint (/metrics), such as :9101.
//
// The arguments after a literal `--` are HAProxy's command, binary first. Without
// them hapsuper runs `haproxy -f /usr/local/etc/haproxy/haproxy.cfg`, the
// official image's command.
package conf
