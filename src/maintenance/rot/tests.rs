//! Unit tests of `rot`.

use super::*;

fn brute_force(titles: &[(String, Vec<String>)], t: f64) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 0..titles.len() {
        for j in i + 1..titles.len() {
            let (a, b) = (&titles[i].1, &titles[j].1);
            if a.is_empty() || b.is_empty() {
                continue;
            }
            let shared = a.iter().filter(|x| b.contains(x)).count();
            if shared as f64 / (a.len() + b.len() - shared) as f64 >= t {
                let (x, y) = (titles[i].0.clone(), titles[j].0.clone());
                out.push(if x <= y { (x, y) } else { (y, x) });
            }
        }
    }
    out.sort();
    out
}

proptest::proptest! {
    /// Prefix filtering finds exactly the pairs an all-pairs scan finds.
    #[test]
    fn prefix_filtering_is_exact(raw in proptest::collection::vec(proptest::collection::vec(0u8..12, 0..6), 0..40), t in 0.3f64..1.0) {
        let titles: Vec<(String, Vec<String>)> = raw.iter().enumerate().map(|(i, words)| {
            let title = words.iter().map(|w| format!("w{w}")).collect::<Vec<_>>().join(" ");
            (format!("n{i:03}.md"), title_tokens(&title))
        }).collect();
        let fast: Vec<(String, String)> = redundant_pairs(&titles, t).into_iter().map(|p| (p.a, p.b)).collect();
        proptest::prop_assert_eq!(fast, brute_force(&titles, t));
    }
}

#[test]
fn the_link_rot_request_a_person_approves_is_the_urls_check_links_will_contact() {
    let link = |path: &str, line: usize, url: &str| (path.to_string(), line, url.to_string());
    let links = [
        link("03_Resources/b.md", 3, "https://z.example/1"),
        link("03_Resources/a.md", 1, "https://a.example/2"),
        link("03_Resources/c.md", 9, "https://z.example/1"),
        link("03_Resources/d.md", 2, "https://m.example/3"),
    ];
    let (paths, request) = link_rot_request(&links, 10);
    assert_eq!(paths, ["03_Resources/a.md", "03_Resources/b.md", "03_Resources/c.md", "03_Resources/d.md"]);
    assert_eq!(request, serde_json::json!({"urls": ["https://a.example/2", "https://m.example/3", "https://z.example/1"]}));
    // Over max_links, only the first distinct URLs in reading order are contacted, and only
    // their notes are named; the order of the links does not change the request.
    let (paths, request) = link_rot_request(&links, 2);
    assert_eq!(paths, ["03_Resources/a.md", "03_Resources/b.md", "03_Resources/c.md"]);
    assert_eq!(request, serde_json::json!({"urls": ["https://a.example/2", "https://z.example/1"]}));
    let mut reordered = links.clone();
    reordered.swap(0, 2);
    assert_eq!(link_rot_request(&reordered, 10), link_rot_request(&links, 10));
}

/// Near duplicates report `comparing` block by block, and find the same pairs as without.
#[test]
fn near_duplicates_report_progress_and_find_the_same_pairs() {
    let n = 600;
    let dimension = 4;
    let mut vectors = NoteVectors { dimension, ..Default::default() };
    for i in 0..n {
        vectors.paths.push(format!("03_Resources/n{i:04}.md"));
        // Every tenth note points the same way as the one before it.
        let angle = if i % 10 == 1 { (i - 1) as f32 } else { i as f32 } * 0.7;
        let v = [angle.cos(), angle.sin(), 0.0, 0.0];
        vectors.data.extend_from_slice(&v);
    }
    let reports = std::cell::RefCell::new(Vec::new());
    let with = near_duplicates_with_progress(&vectors, 0.9999, &|s, d, t| reports.borrow_mut().push((s, d, t)));
    assert_eq!(format!("{with:?}"), format!("{:?}", near_duplicates(&vectors, 0.9999)));
    assert!(with.len() >= 60, "{}", with.len());
    assert_eq!(reports.into_inner(), vec![("comparing", 0, n), ("comparing", 256, n), ("comparing", 512, n), ("comparing", n, n)]);
}
