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
