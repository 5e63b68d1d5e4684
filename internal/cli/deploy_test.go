package cli

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The Kubernetes deployment in deploy/ (see deploy/README.md) is plain YAML that no tool
// here can apply: these tests hold it to the shape Kubernetes expects, to itself (labels,
// ports, Secret keys), and to the flags latch really has.

// deployDir is the repository's deploy folder, from this package's directory.
const deployDir = "../../deploy"

// k8sObject is the part of a Kubernetes object these tests read; the decoder ignores
// the rest.
type k8sObject struct {
	file       string
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec       k8sSpec           `yaml:"spec"`
	StringData map[string]string `yaml:"stringData"`
}

// k8sSpec holds the spec fields of every kind the tests look into.
type k8sSpec struct {
	// Selector is a Service's label map, or a Deployment's, PodDisruptionBudget's or
	// monitor's {matchLabels: ...}.
	Selector    map[string]any `yaml:"selector"`
	PodSelector map[string]any `yaml:"podSelector"` // a NetworkPolicy's
	Template    struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec k8sPodSpec `yaml:"spec"`
	} `yaml:"template"`
	ClusterIP                string `yaml:"clusterIP"`
	PublishNotReadyAddresses bool   `yaml:"publishNotReadyAddresses"`
	Ports                    []struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort string `yaml:"targetPort"`
	} `yaml:"ports"`
	Replicas       *int `yaml:"replicas"`
	MinAvailable   any  `yaml:"minAvailable"`
	MaxUnavailable any  `yaml:"maxUnavailable"`
}

type k8sPodSpec struct {
	SecurityContext k8sSecurityContext `yaml:"securityContext"`
	InitContainers  []k8sContainer     `yaml:"initContainers"`
	Containers      []k8sContainer     `yaml:"containers"`
}

type k8sSecurityContext struct {
	RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
	ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		ValueFrom *struct {
			SecretKeyRef *k8sSecretKeyRef `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe map[string]any `yaml:"readinessProbe"`
	LivenessProbe  map[string]any `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext k8sSecurityContext `yaml:"securityContext"`
}

type k8sSecretKeyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional bool   `yaml:"optional"`
}

// readManifests parses every YAML document under deploy/ but the Helm chart, whose
// templates are YAML only once Helm renders them (helm_test.go).
func readManifests(t *testing.T) []k8sObject {
	t.Helper()
	var objs []k8sObject
	err := filepath.WalkDir(deployDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path == filepath.Join(deployDir, "helm") {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		more, err := parseManifests(path, src)
		objs = append(objs, more...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatalf("no Kubernetes manifests under %s", deployDir)
	}
	return objs
}

// parseManifests parses the YAML documents of src, read from file.
func parseManifests(file string, src []byte) ([]k8sObject, error) {
	var objs []k8sObject
	dec := yaml.NewDecoder(bytes.NewReader(src))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return objs, err
		}
		if len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
			continue // an empty document between two ---
		}
		o := k8sObject{file: file}
		if err := doc.Decode(&o); err != nil {
			return objs, err
		}
		objs = append(objs, o)
	}
}

func (o k8sObject) String() string {
	return filepath.Base(o.file) + ": " + o.Kind + " " + o.Metadata.Name
}

// containers are the containers of a workload's pods.
func (o k8sObject) containers() []k8sContainer {
	return append(slices.Clone(o.Spec.Template.Spec.InitContainers), o.Spec.Template.Spec.Containers...)
}

// selects says whether o's selector picks pods labelled labels.
func (o k8sObject) selects(labels map[string]string) bool {
	sel := o.Spec.Selector
	switch o.Kind {
	case "Service": // a plain label map
	case "NetworkPolicy":
		sel, _ = o.Spec.PodSelector["matchLabels"].(map[string]any)
	default:
		sel, _ = sel["matchLabels"].(map[string]any)
	}
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if s, ok := v.(string); !ok || labels[k] != s {
			return false
		}
	}
	return true
}

func byKind(objs []k8sObject, kind string) []k8sObject {
	var out []k8sObject
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// latchDeployment is the one Deployment of latch nodes.
func latchDeployment(t *testing.T, objs []k8sObject) k8sObject {
	t.Helper()
	ds := byKind(objs, "Deployment")
	if len(ds) != 1 {
		t.Fatalf("want one Deployment of latch nodes, found %d", len(ds))
	}
	return ds[0]
}

func TestDeployManifestsAreKubernetesObjects(t *testing.T) {
	objs := readManifests(t)
	seen := map[string]bool{}
	namespaces := byKind(objs, "Namespace")
	if len(namespaces) != 1 {
		t.Fatalf("want one Namespace, found %d", len(namespaces))
	}
	for _, o := range objs {
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Errorf("%s: apiVersion %q, kind %q, metadata.name %q: all three are required", o.file, o.APIVersion, o.Kind, o.Metadata.Name)
		}
		if id := o.Kind + "/" + o.Metadata.Namespace + "/" + o.Metadata.Name; seen[id] {
			t.Errorf("%s: defined twice", o)
		} else {
			seen[id] = true
		}
		if o.Kind != "Namespace" && o.Metadata.Namespace != namespaces[0].Metadata.Name {
			t.Errorf("%s: namespace %q, want %q", o, o.Metadata.Namespace, namespaces[0].Metadata.Name)
		}
	}
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "Job", "Secret"} {
		if len(byKind(objs, kind)) == 0 {
			t.Errorf("no %s among the manifests", kind)
		}
	}
	for _, o := range append(byKind(objs, "Deployment"), byKind(objs, "Job")...) {
		checkPods(t, o)
	}
	d := latchDeployment(t, objs)
	if !d.selects(d.Spec.Template.Metadata.Labels) {
		t.Errorf("%s: selector %v does not match its pods' labels %v", d, d.Spec.Selector, d.Spec.Template.Metadata.Labels)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if !followsDatastore(c.ReadinessProbe) {
			t.Errorf("%s: container %s: the readinessProbe must ask latch's health (GET /healthz or a grpc probe), which follows the datastore", d, c.Name)
		}
		if c.LivenessProbe == nil || followsDatastore(c.LivenessProbe) {
			t.Errorf("%s: container %s needs a livenessProbe that does not follow the datastore, or an outage restarts every node", d, c.Name)
		}
	}
}

// followsDatastore says whether probe asks latch's health services, which report
// NOT_SERVING while the datastore is unreachable.
func followsDatastore(probe map[string]any) bool {
	get, _ := probe["httpGet"].(map[string]any)
	return probe["grpc"] != nil || (get != nil && get["path"] == "/healthz")
}

// checkPods holds the containers of o's pods to the deployment's rules: an image,
// arguments, CPU and memory requests and limits, and no way to write the root
// filesystem or to run as root.
func checkPods(t *testing.T, o k8sObject) {
	t.Helper()
	cs := o.containers()
	if len(cs) == 0 {
		t.Errorf("%s: no containers", o)
	}
	podNonRoot := o.Spec.Template.Spec.SecurityContext.RunAsNonRoot
	for _, c := range cs {
		if c.Image == "" || len(c.Args) == 0 {
			t.Errorf("%s: container %q has image %q and %d args; want both", o, c.Name, c.Image, len(c.Args))
		}
		for _, res := range []string{"cpu", "memory"} {
			if c.Resources.Requests[res] == "" || c.Resources.Limits[res] == "" {
				t.Errorf("%s: container %s lacks a %s request or limit", o, c.Name, res)
			}
		}
		sc := c.SecurityContext
		nonRoot := sc.RunAsNonRoot
		if nonRoot == nil {
			nonRoot = podNonRoot
		}
		if nonRoot == nil || !*nonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: container %s must run as non-root with a read-only root filesystem and no privilege escalation", o, c.Name)
		}
	}
}

func TestDeployManifestsAgree(t *testing.T) {
	objs := readManifests(t)
	d := latchDeployment(t, objs)
	pods := d.Spec.Template.Metadata.Labels
	ports := map[string]int{}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
	}
	var headless []k8sObject
	for _, s := range byKind(objs, "Service") {
		if !s.selects(pods) {
			t.Errorf("%s: selector %v picks none of the latch pods (labels %v)", s, s.Spec.Selector, pods)
		}
		for _, p := range s.Spec.Ports {
			if _, ok := ports[p.TargetPort]; !ok {
				t.Errorf("%s: port %s targets %q, which no latch container port is named", s, p.Name, p.TargetPort)
			}
		}
		if s.Spec.ClusterIP == "None" {
			headless = append(headless, s)
			if s.Spec.PublishNotReadyAddresses {
				t.Errorf("%s: a headless Service for discovery must publish ready pods only", s)
			}
		}
	}
	if len(headless) == 0 {
		t.Error("no headless Service (clusterIP: None) for the nodes to find each other by")
	}
	for _, kind := range []string{"PodDisruptionBudget", "NetworkPolicy", "PodMonitor"} {
		for _, o := range byKind(objs, kind) {
			if !o.selects(pods) {
				t.Errorf("%s: selects none of the latch pods (labels %v)", o, pods)
			}
			if kind == "PodDisruptionBudget" && o.Spec.MinAvailable == nil && o.Spec.MaxUnavailable == nil {
				t.Errorf("%s: set minAvailable or maxUnavailable", o)
			}
		}
	}
	checkSecretRefs(t, objs)
	checkDispatchAddrs(t, d, headless, ports)
}

// checkSecretRefs checks that the datastore URI of every container comes from a Secret,
// and that every Secret key the containers read is in the example Secret.
func checkSecretRefs(t *testing.T, objs []k8sObject) {
	t.Helper()
	examples := map[string]map[string]string{}
	for _, s := range byKind(objs, "Secret") {
		examples[s.Metadata.Name] = s.StringData
	}
	for _, o := range append(byKind(objs, "Deployment"), byKind(objs, "Job")...) {
		for _, c := range o.containers() {
			fromSecret := map[string]bool{}
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				fromSecret[e.Name] = true
				if _, ok := examples[ref.Name][ref.Key]; !ok {
					t.Errorf("%s: container %s reads key %q of Secret %q, which the example Secret lacks", o, c.Name, ref.Key, ref.Name)
				}
			}
			uri, ok := flagValue(c.Args, "datastore-conn-uri")
			if !ok {
				continue
			}
			if m := envRef.FindStringSubmatch(uri); m == nil || m[0] != uri || !fromSecret[m[1]] {
				t.Errorf("%s: container %s gives --datastore-conn-uri %q; want $(VAR) with VAR taken from a Secret", o, c.Name, uri)
			}
		}
	}
}

// envRef is Kubernetes' reference to a container's environment variable in its args.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// flagValue returns the value args give --name, written --name=value or --name value.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// checkDispatchAddrs checks that the nodes look each other up through a headless
// Service of their own namespace, on the port the dispatch listener binds.
func checkDispatchAddrs(t *testing.T, d k8sObject, headless []k8sObject, ports map[string]int) {
	t.Helper()
	args := d.Spec.Template.Spec.Containers[0].Args
	upstream, ok := flagValue(args, "dispatch-upstream-addr")
	if !ok {
		t.Fatalf("%s: no --dispatch-upstream-addr", d)
	}
	host, port, err := net.SplitHostPort(strings.TrimPrefix(upstream, "dns:///"))
	if !strings.HasPrefix(upstream, "dns:///") || err != nil {
		t.Fatalf("%s: --dispatch-upstream-addr %q: want dns:///SERVICE.NAMESPACE.svc.cluster.local:PORT", d, upstream)
	}
	listen, _ := flagValue(args, "dispatch-cluster-addr")
	if _, lport, err := net.SplitHostPort(listen); err != nil || lport != strconv.Itoa(ports["dispatch"]) {
		t.Errorf("%s: --dispatch-cluster-addr %q does not listen on the dispatch container port %d", d, listen, ports["dispatch"])
	}
	for _, s := range headless {
		if host != s.Metadata.Name+"."+s.Metadata.Namespace+".svc.cluster.local" {
			continue
		}
		for _, p := range s.Spec.Ports {
			if strconv.Itoa(p.Port) == port && ports[p.TargetPort] == ports["dispatch"] {
				return
			}
		}
	}
	t.Errorf("%s: --dispatch-upstream-addr %q names no headless Service port leading to the dispatch port", d, upstream)
}

func TestDeployManifestsUseRealFlags(t *testing.T) { checkRealFlags(t, readManifests(t)) }

// checkRealFlags checks that every container of objs runs a latch command with flags
// and LATCH_* variables it has, and values they parse.
func checkRealFlags(t *testing.T, objs []k8sObject) {
	t.Helper()
	for _, o := range objs {
		for _, c := range o.containers() {
			root := NewRootCommand(Env{})
			cmd, rest, err := root.Find(c.Args)
			if err != nil || cmd == root {
				t.Errorf("%s: container %s runs `latch %s`, which is no latch command", o, c.Name, strings.Join(c.Args, " "))
				continue
			}
			defined := map[string]bool{}
			for _, e := range c.Env {
				defined[e.Name] = true
				if strings.HasPrefix(e.Name, "LATCH_") && !strings.Contains(cmd.Long+cmd.UsageString(), e.Name) {
					t.Errorf("%s: container %s sets %s, which `%s` does not read (its help names no such variable)", o, c.Name, e.Name, cmd.CommandPath())
				}
			}
			var missing, expanded []string
			for _, a := range rest {
				for _, m := range envRef.FindAllStringSubmatch(a, -1) {
					if !defined[m[1]] {
						t.Errorf("%s: container %s refers to $(%s), which its env does not define", o, c.Name, m[1])
					}
				}
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if strings.HasPrefix(a, "--") && cmd.Flag(name) == nil {
					missing = append(missing, "--"+name)
				}
				// Kubernetes substitutes the variables before latch parses its flags.
				expanded = append(expanded, envRef.ReplaceAllString(a, "placeholder"))
			}
			if len(missing) > 0 {
				t.Errorf("%s: container %s passes `%s` flags it does not have: %s",
					o, c.Name, cmd.CommandPath(), strings.Join(missing, ", "))
				continue
			}
			// Parsing checks the values too: sizes, durations, booleans.
			if err := cmd.ParseFlags(expanded); err != nil {
				t.Errorf("%s: container %s: `%s %s`: %v", o, c.Name, cmd.CommandPath(), strings.Join(expanded, " "), err)
			}
		}
	}
}

// Every file under deploy/kubernetes is applied by `kubectl apply -f`; the Secret with
// placeholder values must not be among them.
func TestDeployExampleSecretIsNotApplied(t *testing.T) {
	for _, s := range byKind(readManifests(t), "Secret") {
		rel, _ := filepath.Rel(deployDir, s.file)
		if filepath.Dir(rel) == "kubernetes" {
			t.Errorf("%s: a Secret in deploy/kubernetes would be applied with the rest, placeholders and all", s)
		}
		for k, v := range s.StringData {
			if !strings.Contains(v, "CHANGE-ME") {
				t.Errorf("%s: key %s: an example Secret's values must be marked CHANGE-ME", s, k)
			}
		}
	}
}
