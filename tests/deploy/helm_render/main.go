// helm_render renders a Helm chart the way `helm template` does, for CI machines without helm:
// Go text/template with sprig and Helm's own functions (include, tpl, required, fail, toYaml,
// fromYaml, toJson, fromJson, lookup), the .Values (values.yaml coalesced with -f files and
// -set pairs: maps merge, null deletes), .Release, .Chart, .Capabilities, .Files and .Template
// objects, missing keys rendering as empty, and "<no value>" removed. Each rendered manifest must
// parse as YAML; the output is the `---` / `# Source:` stream helm prints. NOTES.txt is rendered
// (so its errors show) but printed only with -notes, instead of the manifests.
//
// Not modelled: subcharts, the kubeVersion constraint, values.schema.json (check_helm_values.mjs
// validates values), .helmignore beyond the chart's templates/ split, manifest sorting by kind.
//
// Build offline against Debian's Go packages (golang-go, golang-github-masterminds-sprig-dev,
// golang-k8s-sigs-yaml-dev):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o helm_render ./tests/deploy/helm_render
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"sigs.k8s.io/yaml"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// Files is .Files: the chart's files outside templates/, by path relative to the chart.
type Files map[string][]byte

func (f Files) Get(name string) string { return string(f[name]) }

func (f Files) GetBytes(name string) []byte { return f[name] }

func (f Files) Glob(pattern string) Files {
	out := Files{}
	for name, data := range f {
		if ok, _ := path.Match(pattern, name); ok {
			out[name] = data
		}
	}
	return out
}

func (f Files) AsConfig() string {
	if len(f) == 0 {
		return ""
	}
	m := map[string]string{}
	for name, data := range f {
		m[path.Base(name)] = string(data)
	}
	return toYAML(m)
}

func (f Files) Lines(name string) []string {
	if len(f[name]) == 0 {
		return []string{}
	}
	return strings.Split(string(f[name]), "\n")
}

// APIVersions is .Capabilities.APIVersions.
type APIVersions []string

func (a APIVersions) Has(version string) bool {
	for _, v := range a {
		if v == version {
			return true
		}
	}
	return false
}

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// coalesce merges override into base as Helm does: maps merge, null deletes, the rest replaces.
func coalesce(base, override map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range override {
		if v == nil {
			delete(out, k)
			continue
		}
		bm, bok := out[k].(map[string]interface{})
		om, ook := v.(map[string]interface{})
		if bok && ook {
			out[k] = coalesce(bm, om)
		} else {
			out[k] = v
		}
	}
	return out
}

// setOverride turns one -set KEY.PATH=VALUE into a values map, typing the scalar as helm does.
func setOverride(assignment string) (map[string]interface{}, error) {
	key, raw, ok := strings.Cut(assignment, "=")
	if !ok {
		return nil, fmt.Errorf("-set %q: want KEY=VALUE", assignment)
	}
	var value interface{} = raw
	switch {
	case raw == "null":
		value = nil
	case raw == "true" || raw == "false":
		value = raw == "true"
	default:
		if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
			value = n
		}
	}
	parts := strings.Split(key, ".")
	override := map[string]interface{}{parts[len(parts)-1]: value}
	for i := len(parts) - 2; i >= 0; i-- {
		override = map[string]interface{}{parts[i]: override}
	}
	return override, nil
}

func readYAMLMap(file string) (map[string]interface{}, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return m, nil
}

// chartMetadata maps Chart.yaml's keys to the Go field names templates use (.Chart.AppVersion).
func chartMetadata(raw map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range raw {
		out[strings.ToUpper(k[:1])+k[1:]] = v
	}
	return out
}

var manifestSeparator = regexp.MustCompile(`(?m)^---\s*$`)

func run() error {
	var valueFiles, sets, apiVersions stringList
	chartDir := flag.String("chart", "", "chart directory")
	release := flag.String("release", "specd", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	kubeVersion := flag.String("kube-version", "1.32.0", "Kubernetes version of .Capabilities")
	notesOnly := flag.Bool("notes", false, "print the rendered NOTES.txt instead of the manifests")
	flag.Var(&valueFiles, "f", "values file (repeatable)")
	flag.Var(&sets, "set", "KEY=VALUE (repeatable)")
	flag.Var(&apiVersions, "api-versions", "extra group/version of .Capabilities.APIVersions (repeatable)")
	flag.Parse()
	if *chartDir == "" {
		return errors.New("-chart is required")
	}

	chartRaw, err := readYAMLMap(filepath.Join(*chartDir, "Chart.yaml"))
	if err != nil {
		return err
	}
	values, err := readYAMLMap(filepath.Join(*chartDir, "values.yaml"))
	if err != nil {
		return err
	}
	for _, file := range valueFiles {
		override, err := readYAMLMap(file)
		if err != nil {
			return err
		}
		values = coalesce(values, override)
	}
	for _, assignment := range sets {
		override, err := setOverride(assignment)
		if err != nil {
			return err
		}
		values = coalesce(values, override)
	}

	files := Files{}
	templates := map[string]string{}
	chartName, _ := chartRaw["name"].(string)
	err = filepath.WalkDir(*chartDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(*chartDir, p)
		rel = filepath.ToSlash(rel)
		info, err := os.Stat(p) // follows symlinks, as helm's loader does
		if err != nil {
			return err
		}
		if info.IsDir() {
			if d.Type()&fs.ModeSymlink != 0 {
				return walkLinkedDir(p, rel, files)
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "templates/"):
			templates[chartName+"/"+rel] = string(data)
		case rel == "Chart.yaml" || rel == "values.yaml" || rel == "values.schema.json" || rel == ".helmignore":
		default:
			files[rel] = data
		}
		return nil
	})
	if err != nil {
		return err
	}

	major, minor, _ := strings.Cut(strings.TrimPrefix(*kubeVersion, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	versions := APIVersions{"v1", "apps/v1", "batch/v1", "policy/v1", "networking.k8s.io/v1",
		"autoscaling/v2", "rbac.authorization.k8s.io/v1", "storage.k8s.io/v1"}
	versions = append(versions, apiVersions...)
	top := map[string]interface{}{
		"Values": values,
		"Chart":  chartMetadata(chartRaw),
		"Release": map[string]interface{}{
			"Name": *release, "Namespace": *namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{
				"Version": "v" + strings.TrimPrefix(*kubeVersion, "v"), "Major": major, "Minor": minor,
				"GitVersion": "v" + strings.TrimPrefix(*kubeVersion, "v"),
			},
			"APIVersions": versions,
		},
		"Files": files,
	}

	root := template.New("chart").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	includeDepth := map[string]int{}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		if includeDepth[name] > 1000 {
			return "", fmt.Errorf("include %q: too deep", name)
		}
		includeDepth[name]++
		defer func() { includeDepth[name]-- }()
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, data)
		return strings.ReplaceAll(buf.String(), "<no value>", ""), err
	}
	funcs["required"] = func(message string, v interface{}) (interface{}, error) {
		if s, ok := v.(string); v == nil || (ok && s == "") {
			return v, errors.New(message)
		}
		return v, nil
	}
	funcs["fail"] = func(message string) (string, error) { return "", errors.New(message) }
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["toJson"] = toJSON
	funcs["fromJson"] = fromJSON
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	root.Funcs(funcs)

	names := make([]string, 0, len(templates))
	for name := range templates {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, err := root.New(name).Parse(templates[name]); err != nil {
			return err
		}
	}

	var out strings.Builder
	for _, name := range names {
		base := path.Base(name)
		if strings.HasPrefix(base, "_") {
			continue
		}
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": name, "BasePath": chartName + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return err
		}
		rendered := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			if *notesOnly {
				out.WriteString(rendered)
			}
			continue
		}
		if *notesOnly {
			continue
		}
		for _, doc := range manifestSeparator.Split(rendered, -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var parsed interface{}
			if err := yaml.Unmarshal([]byte(doc), &parsed); err != nil {
				return fmt.Errorf("YAML parse error on %s: %w\n%s", name, err, doc)
			}
			if parsed == nil { // comments only
				continue
			}
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", name, strings.Trim(doc, "\n"))
		}
	}
	_, err = os.Stdout.WriteString(out.String())
	return err
}

// walkLinkedDir adds the files under a symlinked directory (WalkDir does not descend into one).
func walkLinkedDir(dir, rel string, files Files) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		if info.IsDir() {
			if err := walkLinkedDir(p, rel+"/"+e.Name(), files); err != nil {
				return err
			}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel+"/"+e.Name()] = data
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "helm_render:", err)
		os.Exit(1)
	}
}
