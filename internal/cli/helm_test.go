package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Helm chart in deploy/helm/latch, rendered by the real helm (bin/helm, which
// scripts/ensure-helm.sh builds and `make test` runs) and held to the rules the plain
// manifests follow: the pods' security, the Services' selectors, the dispatch ring's
// addresses, and flags latch serve really has.

var helmChart = filepath.Join(deployDir, "helm", "latch")

func helmPath(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs(filepath.Join("..", "..", "bin", "helm")); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("helm is not installed; scripts/ensure-helm.sh (run by make test) builds it into bin/helm")
	}
	t.Skip("helm is not installed and this is not CI; run scripts/ensure-helm.sh (make test does)")
	return ""
}

// helm runs helm with args and returns its output, and whether it succeeded.
func helm(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(helmPath(t), args...)
	// A fresh home: no user repositories, plugins or caches change what helm does.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// renderChart renders the chart as release "latch" in namespace latch with values set.
func renderChart(t *testing.T, set ...string) []k8sObject {
	t.Helper()
	args := []string{"template", "latch", helmChart, "--namespace", "latch"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, ok := helm(t, args...)
	if !ok {
		t.Fatalf("helm %s:\n%s", strings.Join(args, " "), out)
	}
	objs, err := parseManifests("helm template "+strings.Join(set, ","), []byte(out))
	if err != nil {
		t.Fatalf("helm template %v rendered YAML that does not parse: %v\n%s", set, err, out)
	}
	return objs
}

func TestHelmChartLints(t *testing.T) {
	for _, set := range [][]string{nil, {
		"serviceMonitor.enabled=true", "secret.create=true", "secret.values.grpcPresharedKey=k",
		"secret.values.metricsPresharedKey=m", "secret.values.datastoreConnUri=postgres://db/latch",
	}} {
		args := []string{"lint", "--strict", helmChart}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, ok := helm(t, args...); !ok {
			t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
}

// TestHelmChartRenders renders the default values (a 3-node cluster on a Secret of the
// user's), and checks what the manifests' tests check.
func TestHelmChartRenders(t *testing.T) {
	objs := renderChart(t)
	d := latchDeployment(t, objs)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("%s: replicas %v, want the default 3", d, d.Spec.Replicas)
	}
	for _, kind := range []string{"Job", "PodDisruptionBudget", "NetworkPolicy"} {
		if len(byKind(objs, kind)) != 1 {
			t.Errorf("want one %s by default, found %d", kind, len(byKind(objs, kind)))
		}
	}
	if n := len(byKind(objs, "Secret")) + len(byKind(objs, "ServiceMonitor")); n != 0 {
		t.Errorf("%d Secrets or ServiceMonitors by default: both are opt-in", n)
	}
	for _, o := range append(byKind(objs, "Deployment"), byKind(objs, "Job")...) {
		checkPods(t, o)
	}
	checkRealFlags(t, objs)
	pods := d.Spec.Template.Metadata.Labels
	ports := map[string]int{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	var headless []k8sObject
	for _, o := range append(byKind(objs, "Service"), append(byKind(objs, "PodDisruptionBudget"), byKind(objs, "NetworkPolicy")...)...) {
		if !o.selects(pods) {
			t.Errorf("%s: selects none of the latch pods (labels %v)", o, pods)
		}
		if o.Spec.ClusterIP == "None" && !o.Spec.PublishNotReadyAddresses {
			headless = append(headless, o)
		}
	}
	checkDispatchAddrs(t, d, headless, ports)
}

// TestHelmChartValues: the values change what they say, and bad ones fail naming
// the value at fault.
func TestHelmChartValues(t *testing.T) {
	objs := renderChart(t, "replicaCount=5", "serviceMonitor.enabled=true", "secret.create=true",
		"secret.values.grpcPresharedKey=k", "secret.values.metricsPresharedKey=m", "secret.values.dispatchClusterPresharedKey=d",
		"secret.values.datastoreConnUri=postgres://db/latch", "datastore.engine=cockroachdb", "extraArgs[0]=--dispatch-concurrency-limit=20",
		"resources.limits.memory=2Gi")
	d := latchDeployment(t, objs)
	args := d.Spec.Template.Spec.Containers[0].Args
	if engine, _ := flagValue(args, "datastore-engine"); engine != "cockroachdb" || *d.Spec.Replicas != 5 ||
		d.Spec.Template.Spec.Containers[0].Resources.Limits["memory"] != "2Gi" || args[len(args)-1] != "--dispatch-concurrency-limit=20" {
		t.Errorf("%s: replicas %d, args %q, limits %v: the values were not applied", d, *d.Spec.Replicas, args, d.Spec.Template.Spec.Containers[0].Resources.Limits)
	}
	checkSecretRefs(t, objs)
	checkRealFlags(t, objs)
	monitors := byKind(objs, "ServiceMonitor")
	if len(monitors) != 1 {
		t.Fatalf("want one ServiceMonitor, found %d", len(monitors))
	}
	scraped := false
	for _, s := range byKind(objs, "Service") {
		if monitors[0].selects(s.Metadata.Labels) {
			scraped = s.selects(d.Spec.Template.Metadata.Labels) && len(s.Spec.Ports) == 1 && s.Spec.Ports[0].TargetPort == "metrics"
		}
	}
	if !scraped {
		t.Errorf("%s selects no Service of the latch pods' metrics port", monitors[0])
	}

	single := latchDeployment(t, renderChart(t, "cluster.enabled=false", "podDisruptionBudget.enabled=false", "replicaCount=1"))
	if _, ok := flagValue(single.Spec.Template.Spec.Containers[0].Args, "dispatch-upstream-addr"); ok {
		t.Errorf("cluster.enabled=false still dispatches: %q", single.Spec.Template.Spec.Containers[0].Args)
	}
	for _, bad := range []struct{ set, want string }{
		{"datastore.engine=memory", "datastore.engine"},
		{"secret.create=true", "secret.values.grpcPresharedKey"},
	} {
		out, ok := helm(t, "template", "latch", helmChart, "--set", bad.set)
		if ok || !strings.Contains(out, bad.want) {
			t.Errorf("helm template --set %s: succeeded %v, said %q; want a failure naming %s", bad.set, ok, out, bad.want)
		}
	}
}
