package devhost_test

import (
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/azurite"
)

// chromium returns Debian's chromium, which make test installs when it is
// missing: the dashboard test is never skipped.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: `make test` installs it (apt-get install chromium); the dashboard test needs it")
	return ""
}

// headless runs chromium on url with args, after the page's scripts ran.
func headless(t *testing.T, ctx context.Context, url string, args ...string) []byte {
	t.Helper()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=15000", "--window-size=1200,900"}
	cmd := exec.CommandContext(ctx, chromium(t), append(append(base, args...), url)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return out
}

// blockedColour is the background of a blocked order's row (dashboard.html).
func blockedColour(r, g, b, _ uint32) bool {
	r, g, b = r>>8, g>>8, b>>8
	near := func(v, want uint32) bool { return v+6 >= want && v <= want+6 }
	return near(r, 0xff) && near(g, 0xd2) && near(b, 0x4d)
}

// rowBands counts the bands of the blocked rows' colour down column x.
func rowBands(img image.Image, x int) int {
	bands, in := 0, 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		if blockedColour(img.At(x, y).RGBA()) {
			in++
			continue
		}
		if in >= 10 {
			bands++
		}
		in = 0
	}
	if in >= 10 {
		bands++
	}
	return bands
}

// TestDashboardInChromium: the dashboard of a real run, rendered by
// headless Chromium, lists every blocked order with its missing seq and
// cause, and its screenshot shows one blocked row per blocked order.
func TestDashboardInChromium(t *testing.T) {
	ctx := timeout(t, 2*time.Minute)
	e := start(t, stage(t, nil), azurite.Options{})
	for _, id := range []string{"dash-a", "dash-b", "dash-c"} {
		e.poison(t, id)
	}
	e.waitIdle(ctx)
	if n := len(e.blocked(t)); n != 3 {
		t.Fatalf("%d blocked orders, want 3", n)
	}
	url := e.host.URL() + "/api/dashboard"
	dom := string(headless(t, ctx, url, "--dump-dom"))
	if !strings.Contains(dom, `data-ready="true"`) {
		t.Fatalf("the page did not load its data:\n%s", tail(dom, 2000))
	}
	for _, id := range []string{"dash-a", "dash-b", "dash-c"} {
		row := `<tr class="blocked" data-order="` + id + `"><td>` + id + `</td><td>2</td><td>1</td>`
		if !strings.Contains(dom, row) {
			t.Errorf("no row for %s with missing seq 2 and 1 parked in the rendered page", id)
		}
	}
	if strings.Count(dom, "permanent: unreadable") != 3 {
		t.Errorf("the rows do not show the cause (permanent, unreadable)")
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if dir := os.Getenv("E2E_LOG_DIR"); dir != "" {
		shot = filepath.Join(dir, "dashboard.png")
	}
	headless(t, ctx, url, "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// Down the left padding of the first cell (body margin 16 px, cell padding 8 px): background only.
	if n := rowBands(img, 20); n != 3 {
		t.Fatalf("the screenshot shows %d blocked rows, want 3", n)
	}
}
