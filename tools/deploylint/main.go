// Command deploylint lints the container files operators copy, where no
// container engine runs (the project's test machines have none): the
// Dockerfile with BuildKit's own Dockerfile linter (the checks `docker
// build --check` runs), and deploy/compose.yaml with compose-go, the
// loader Docker Compose itself uses, which checks the file against the
// Compose specification's schema and resolves it. It is a module of its
// own, like bench/, so that the fleetmesh module never depends on either.
//
//	go run . REPO_ROOT
//
// It prints every finding and exits 1 if there is one.
//
// Base images are not fetched: the linter is given an image config with
// only the default PATH, so a check that needs what a base image sets
// (an ENV the Dockerfile reads, its platform) sees nothing there.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerui"
	digest "github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: deploylint REPO_ROOT")
		os.Exit(2)
	}
	root := os.Args[1]
	ctx := context.Background()
	var findings []string
	fs, err := lintDockerfile(ctx, filepath.Join(root, "Dockerfile"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploylint:", err)
		os.Exit(1)
	}
	findings = append(findings, fs...)
	if err := checkCompose(ctx, filepath.Join(root, "deploy", "compose.yaml")); err != nil {
		findings = append(findings, "deploy/compose.yaml: "+err.Error())
	}
	for _, f := range findings {
		fmt.Println(f)
	}
	if len(findings) > 0 {
		os.Exit(1)
	}
	fmt.Println("deploylint: Dockerfile and deploy/compose.yaml are clean")
}

// lintDockerfile runs BuildKit's Dockerfile checks over path.
func lintDockerfile(ctx context.Context, path string) ([]string, error) {
	dt, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	src := llb.Local("dockerfile")
	def, err := src.Marshal(ctx)
	if err != nil {
		return nil, err
	}
	sm := llb.NewSourceMap(&src, "Dockerfile", "Dockerfile", dt)
	sm.Definition = def
	res, err := dockerfile2llb.DockerfileLint(ctx, dt, dockerfile2llb.ConvertOpt{
		Config:       dockerui.Config{},
		SourceMap:    sm,
		MetaResolver: offlineResolver{},
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, w := range res.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		out = append(out, fmt.Sprintf("Dockerfile:%d: %s: %s (%s)", line, w.RuleName, w.Detail, w.URL))
	}
	if res.Error != nil {
		out = append(out, "Dockerfile: "+res.Error.Message)
	}
	return out, nil
}

// offlineResolver answers every base image with a config holding only the
// default PATH, instead of asking a registry.
type offlineResolver struct{}

func (offlineResolver) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	img := ocispecs.Image{
		Platform: ocispecs.Platform{OS: "linux", Architecture: "amd64"},
		Config:   ocispecs.ImageConfig{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
	}
	dt, err := json.Marshal(img)
	if err != nil {
		return "", "", nil, err
	}
	return ref, digest.FromBytes(dt), dt, nil
}

// checkCompose loads path as Docker Compose does: schema, interpolation,
// merge keys, references between services, volumes and networks.
func checkCompose(ctx context.Context, path string) error {
	dt, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return err
	}
	p, err := loader.LoadWithContext(ctx, types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: path, Content: dt}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) { o.SetProjectName("fleetmesh", true) })
	if err != nil {
		return err
	}
	if len(p.Services) == 0 {
		return errors.New("no services")
	}
	return nil
}
