// Package routing observes whether anything still routes new connections to
// this pod, so that a draining HAProxy closes its listeners only once nothing
// does. It answers drain.Routing: withdrawn, pending or unverified, with a
// detail naming what is pending or was not observed.
//
// # What it watches
//
// For the pod's whole life it watches the EndpointSlices and Services of the
// pod's namespace (informers whose transform keeps only what the verdict
// reads) and the pod itself (deletionGracePeriodSeconds, hostNetwork,
// hostPorts, readiness gates), through API: kube.Client in the binary, a
// client on a scheme of the few API groups hapsuper uses. This pod's endpoint is the one whose address
// is a pod IP and whose targetRef, when set, names this pod.
//
// Paths kube-proxy does not carry cannot be observed, and the verdict is
// then never withdrawn, only unverified, naming them (unobserved.go): the
// pod's hostNetwork and hostPorts, readiness gates of load balancer
// controllers, Services annotated for IP targets, and Services kube-proxy
// does not program whose slices listed the pod (headless ones, labelled
// service.kubernetes.io/headless, and those labelled
// service.kubernetes.io/service-proxy-name). Until the pod is read, its own
// paths are unknown: unverified. Config.LoadBalancerDelay holds the verdict
// pending that long after the withdrawal, for load balancers that keep
// sending after deregistration (field reports: AWS NLB 30 s to ~2 min).
//
// A path is one Service and one address family whose slices list the pod.
// In the API a path is withdrawn when, as kube-proxy 1.37 reads the slices
// (pkg/proxy/topology.go, endpointslicecache.go):
//   - the pod's endpoint is not ready (a ready one is routed to; with
//     publishNotReadyAddresses it stays ready until removed); and
//   - it is not serving-terminating, or another endpoint of the family is
//     ready for every Service port the pod is listed for (kube-proxy picks
//     endpoints per port, by the slice port's name and protocol, and falls
//     back to serving-terminating endpoints when none is ready); and, with
//     externalTrafficPolicy Local (NodePort,
//     LoadBalancer, external IPs) or internalTrafficPolicy Local, another
//     ready endpoint is on this pod's node (the per-node fallback);
//   - or the endpoint left the slices, or the Service was deleted.
//
// The verdict is recomputed at every change and every call: it is not
// monotonic. The receipt time, in our clock, of the change that turned a path
// withdrawn is kept as that path's R; later changes that leave it withdrawn
// do not move R (frequent unrelated changes would otherwise put confirmation
// off forever), and a path that turns pending again loses it.
//
// Before the watches have synced, or when no slice has listed the pod, the
// verdict is unverified. In ModeEndpointSlices "withdrawn" means withdrawn in
// the API: kube-proxy is not observed, and the detail says so.
//
// # Confirmation by kube-proxy (ModeKubeProxy)
//
// After the stop request, once the API says withdrawn everywhere, every
// node's kube-proxy must show (nodes listed in pages, and read again while
// one has not confirmed, so that deleted and NotReady nodes leave the set,
// named in the detail: nodes.go), per family the pod is listed in, a sync that
// provably holds the change received at R (the latest R of the family's
// paths). kube-proxy's /healthz (1.33+) gives status.<family>.lastUpdated,
// the completion of its last successful sync, and currentTime, both in the
// node's clock. Instants of two clocks are never compared; ages are. A poll
// sent at s and answered at a (our clock) with age = currentTime −
// lastUpdated places the completion C in [s − age, a − age]; polls of the
// same sync intersect their intervals. Cmin is the interval's start.
//
// "A sync completed after I received the change" is not proof. Measured on
// kube-proxy 1.37, nftables, minSyncPeriod 1 s (shared/K8S-HARNESS.md):
// kube-proxy's handler runs within −3…+2 ms of our informer's receipt; a
// sync takes 15–40 ms; plain deletes completed 15–42 ms after receipt; in
// rolling updates the sync already running when the deletion arrived
// completed 1.5–13 ms after receipt without it (the naive rule confirmed
// falsely in 11 of 25 rounds), the real one ~1 s later; a starved informer
// lagged kube-proxy by 3.5–60 ms, so the sync that held the change sometimes
// completed before our receipt; the healthz round trip was 12 ms median, 322
// ms worst. So, with D = SyncAllowance and Lag = WatchLag:
//
//  1. Cmin ≥ R + D: confirmed. A sync that started before kube-proxy got the
//     change (at most R + skew) ends by R + skew + one sync ≤ R + D — if
//     kube-proxy ran. A kube-proxy seen not running (a poll that timed out,
//     or an answer slower than 250 ms: held in a frozen kube-proxy's
//     backlog) did not read its watch either, and its first sync after it
//     resumes may lack the change (measured through real kube-proxy: that
//     node kept routing to the pod ~1 s after such a sync). So a sync that
//     may have completed after such a request was sent (its latest bound
//     after the sending) is judged with R the later of the change's receipt
//     and the stall's end; a sync provably completed before it is not: a
//     slow answer (hapsuper's own CPU throttling) must not make a sync that
//     held the change read "no sync since the change".
//  2. Cmin < R − Lag: pending, "no sync since the change". A partitioned
//     kube-proxy answers healthy:true with a frozen lastUpdated for as long
//     as the partition lasts: it stays here until the drain's bound.
//  3. Otherwise the sync is ambiguous: it may have missed the change. If it
//     did, kube-proxy had the change by R + skew ≤ C + Lag + skew, and its
//     runner starts the next sync minSyncPeriod after the previous one ends
//     (pkg/proxy/runner), so a newer sync completes by C + MinSyncPeriod + D
//     (given Lag + D ≤ MinSyncPeriod) — provided kube-proxy runs. A newer
//     sync is judged afresh; when two quick answers (back within 250 ms:
//     kube-proxy was running when it served them), D apart in the node's
//     clock, the first with age ≥ MinSyncPeriod + D, report the same
//     lastUpdated, none came, so the ambiguous sync held the change:
//     confirmed. One answer is not enough: a frozen kube-proxy (SIGSTOP,
//     starved) holds our request in its listen backlog and serves it the
//     instant it resumes, before its sync loop runs, with the stale sync
//     and a large age — measured through real kube-proxy, a single-answer
//     rule confirmed a frozen node early and let 1–5 new connections reach
//     the pod. Such answers are slow and do not count; by the second quick
//     answer, D after the first, the owed sync would have completed. The
//     wait is measured in the node's clock and needs no round-trip margin.
//     A plain delete is confirmed here, about 1.55 s after R.
//
// kube-proxy restart: a new kube-proxy stamps lastUpdated when its sync loop
// starts, before its first sync (pkg/proxy/*/proxier.go SyncLoop), while the
// old instance's rules still pick the pod. After a poll that failed (refused,
// timed out, not healthz), a lastUpdated other than the one seen before the
// failure is such a stamp until proven otherwise: pending until a later one
// (measured through real kube-proxy restarted 3 s after the delete, its first
// sync slowed by 1 s: the stamp-only rule let 19 new connections reach the
// pod). A node that restarted and synced between two polls is then held
// until its next sync, the bound at worst.
//
// Clock steps: polls of one sync place its completion in intervals that
// must intersect. When they miss each other by more than 50 ms (beyond
// clock slewing, below NTP's 128 ms step threshold) the node's clock was
// stepped, and a backward step makes an old sync look recent: that sync is
// no longer trusted, and only a newer one, stamped and aged in the stepped
// clock, can confirm. Smaller misses widen the interval instead.
//
// A per-family healthy:false (a change waited past kube-proxy's healthz
// timeout) is pending. A node whose healthz port refuses or cannot be
// reached, answers something other than kube-proxy healthz, or lacks the
// per-family status (before 1.33) is unverified and named; one that accepts
// the connection and does not answer within RequestTimeout (a frozen
// kube-proxy) is pending. A node stops being polled once confirmed. The
// verdict: any node pending → pending; else any unverified → unverified,
// naming them; else withdrawn.
//
// What this must never do: count as confirmed a node that still routes new
// connections to the pod. What the rule rests on and cannot check: the
// cluster's minSyncPeriod is at most MinSyncPeriod; a sync and kube-proxy's
// lag behind our watch fit in D (--kube-proxy-sync-allowance: raise it for
// slow iptables syncs, and for API servers whose watch caches lag one
// another); node clocks are not stepped by less than 50 ms during a drain
// (larger steps are detected between polls of one sync, not across syncs); a
// kube-proxy restart shows as a failed poll; a failed sync retried later does not update
// lastUpdated, so a sync failing repeatedly after an ambiguous one goes
// unseen until healthz turns unhealthy. A partition that began less than Lag
// before the change looks like a lagging watcher and is confirmed by rule 3;
// so does a kube-proxy frozen within one sync of a quick answer and resumed
// just before the next (two freezes timed to our polls).
//
// It must not end a drain by itself, panic, or let an API or healthz error
// count as withdrawn: errors degrade the verdict to unverified or pending.
// Every goroutine it starts ends before Run returns, and every request is
// bounded by RequestTimeout.
package routing
