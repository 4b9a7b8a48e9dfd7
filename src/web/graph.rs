//! The link graph as server-rendered SVG: a deterministic force layout (Fruchterman–Reingold
//! from a circle with gravity to the centre, a fixed number of rounds) of a graph the engine already bounded in nodes
//! (`Vault::link_graph`), each node a link to its note. No script: the CSP allows none, and a
//! bounded graph needs no panning to be read. Colours come from the stylesheet (classes), so
//! dark mode applies.

use maud::{Markup, html};

use super::markdown::path_url;
use crate::vault::LinkGraph;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 640.0;
const MARGIN: f64 = 60.0;
const ROUNDS: usize = 200;
/// Pull towards the centre per unit of distance from it.
const GRAVITY: f64 = 0.6;
/// Characters of a node's label.
const LABEL_CHARS: usize = 28;

/// Node positions inside the drawing: node 0 pinned at the centre when `pin_first`.
fn layout(graph: &LinkGraph, pin_first: bool) -> Vec<(f64, f64)> {
    let n = graph.nodes.len();
    if n == 0 {
        return Vec::new();
    }
    let (cx, cy) = (WIDTH / 2.0, HEIGHT / 2.0);
    let mut at: Vec<(f64, f64)> = (0..n)
        .map(|i| {
            if pin_first && i == 0 {
                return (cx, cy);
            }
            let angle = i as f64 * std::f64::consts::TAU / n as f64;
            let radius = if i % 2 == 0 { 0.42 } else { 0.3 };
            (cx + angle.cos() * radius * (WIDTH - 2.0 * MARGIN), cy + angle.sin() * radius * (HEIGHT - 2.0 * MARGIN))
        })
        .collect();
    let area = (WIDTH - 2.0 * MARGIN) * (HEIGHT - 2.0 * MARGIN);
    let k = (area / n as f64).sqrt() * 0.8;
    let mut temperature = WIDTH / 8.0;
    for _ in 0..ROUNDS {
        let mut moved = vec![(0.0f64, 0.0f64); n];
        for i in 0..n {
            for j in (i + 1)..n {
                let (dx, dy) = (at[i].0 - at[j].0, at[i].1 - at[j].1);
                let distance = (dx * dx + dy * dy).sqrt().max(0.01);
                let force = k * k / distance;
                let (fx, fy) = (dx / distance * force, dy / distance * force);
                moved[i].0 += fx;
                moved[i].1 += fy;
                moved[j].0 -= fx;
                moved[j].1 -= fy;
            }
        }
        for &(a, b) in &graph.edges {
            let (dx, dy) = (at[a].0 - at[b].0, at[a].1 - at[b].1);
            let distance = (dx * dx + dy * dy).sqrt().max(0.01);
            let force = distance * distance / k;
            let (fx, fy) = (dx / distance * force, dy / distance * force);
            moved[a].0 -= fx;
            moved[a].1 -= fy;
            moved[b].0 += fx;
            moved[b].1 += fy;
        }
        for i in 0..n {
            if pin_first && i == 0 {
                continue;
            }
            // Gravity towards the centre keeps separate clusters from drifting to the corners.
            let (fx, fy) = (moved[i].0 - (at[i].0 - cx) * GRAVITY, moved[i].1 - (at[i].1 - cy) * GRAVITY);
            let length = (fx * fx + fy * fy).sqrt().max(0.01);
            let step = length.min(temperature);
            at[i].0 = (at[i].0 + fx / length * step).clamp(MARGIN, WIDTH - MARGIN);
            at[i].1 = (at[i].1 + fy / length * step).clamp(MARGIN / 2.0, HEIGHT - MARGIN / 2.0);
        }
        temperature = (temperature * 0.97).max(1.0);
    }
    at
}

fn label(title: &str, path: &str) -> String {
    let name = if title.trim().is_empty() { path.rsplit('/').next().unwrap_or(path).trim_end_matches(".md") } else { title.trim() };
    if name.chars().count() > LABEL_CHARS {
        format!("{}…", name.chars().take(LABEL_CHARS - 1).collect::<String>())
    } else {
        name.to_string()
    }
}

/// The graph as an `<svg>`: edges, then nodes sized by degree, each a link to its note with
/// its path as the tooltip. `centred`: node 0 is the note whose neighbourhood this is.
pub(crate) fn svg(graph: &LinkGraph, centred: bool, caption: &str) -> Markup {
    let at = layout(graph, centred);
    let max_degree = graph.nodes.iter().map(|n| n.degree).max().unwrap_or(1).max(1) as f64;
    let view_box = format!("0 0 {WIDTH} {HEIGHT}");
    html! {
        svg.graph #graph xmlns="http://www.w3.org/2000/svg" viewBox=(view_box) role="group" aria-labelledby="graph-caption" {
            title #graph-caption { (caption) }
            g.edges {
                @for &(a, b) in &graph.edges {
                    line x1=(format!("{:.1}", at[a].0)) y1=(format!("{:.1}", at[a].1)) x2=(format!("{:.1}", at[b].0)) y2=(format!("{:.1}", at[b].1)) {}
                }
            }
            g.nodes {
                @for (i, node) in graph.nodes.iter().enumerate() {
                    @let radius = 4.0 + 8.0 * (node.degree as f64 / max_degree).sqrt();
                    a href=(path_url("/note", &node.path)) {
                        title { (node.path) " · " (node.degree) " links" }
                        circle.centre[centred && i == 0] cx=(format!("{:.1}", at[i].0)) cy=(format!("{:.1}", at[i].1)) r=(format!("{radius:.1}")) {}
                        text x=(format!("{:.1}", at[i].0 + radius + 2.0)) y=(format!("{:.1}", at[i].1 + 4.0)) { (label(&node.title, &node.path)) }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::GraphNode;

    fn node(path: &str) -> GraphNode {
        GraphNode { path: path.into(), title: String::new(), degree: 1 }
    }

    #[test]
    fn the_layout_keeps_every_node_inside_the_drawing_and_pins_the_centre() {
        let graph = LinkGraph {
            nodes: (0..30).map(|i| node(&format!("n{i}.md"))).collect(),
            edges: (1..30).map(|i| (0, i)).collect(),
            left_out: 0,
        };
        let at = layout(&graph, true);
        assert_eq!(at[0], (WIDTH / 2.0, HEIGHT / 2.0));
        for (x, y) in &at {
            assert!((MARGIN..=WIDTH - MARGIN).contains(x) && (MARGIN / 2.0..=HEIGHT - MARGIN / 2.0).contains(y), "{x},{y}");
        }
        let distinct: std::collections::BTreeSet<(i64, i64)> = at.iter().map(|(x, y)| (*x as i64, *y as i64)).collect();
        assert!(distinct.len() > 25, "nodes are spread apart: {at:?}");
    }

    #[test]
    fn node_labels_and_paths_are_escaped() {
        let graph = LinkGraph {
            nodes: vec![GraphNode { path: "a/<b>.md".into(), title: "<script>x</script>".into(), degree: 0 }],
            edges: vec![],
            left_out: 0,
        };
        let html = svg(&graph, true, "t").into_string();
        assert!(!html.contains("<script>") && !html.contains("<b>"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
    }
}
