//! Charts as server-rendered inline SVG (the `/charts` page): columns per day, points per day,
//! and horizontal bars per folder. No script and no external resource, so the CSP stays as it
//! is; colours are stylesheet classes (CSS variables, so dark mode follows); every chart is an
//! `img` with a title and a description, and maud escapes every label.

use chrono::NaiveDate;
use maud::{Markup, html};

/// The drawing area of the per-day charts (viewBox units; the SVG is as wide as its box, which
/// is at most 36rem: about one unit per pixel in a 390 px window, text still readable there).
const DAY_WIDTH: f64 = 360.0;
const DAY_HEIGHT: f64 = 130.0;
const DAY_LEFT: f64 = 28.0;
const DAY_RIGHT: f64 = 354.0;
const DAY_TOP: f64 = 12.0;
const DAY_BOTTOM: f64 = 104.0;

/// Folder rows: the label on a line of its own, then the bar's track and the value after it.
const ROW_HEIGHT: f64 = 34.0;
const BAR_LEFT: f64 = 0.0;
const BAR_WIDTH: f64 = 240.0;
/// Characters of a folder name drawn (the whole name is the row's tooltip and in the table).
const LABEL_CHARS: usize = 48;

fn number(value: f64) -> String {
    format!("{value:.1}")
}

/// The x of day `i` of `n` (the centre of its column).
fn day_x(i: usize, n: usize) -> f64 {
    let step = (DAY_RIGHT - DAY_LEFT) / n.max(1) as f64;
    DAY_LEFT + step * (i as f64 + 0.5)
}

/// The y of `value` on a scale up to `max`.
fn day_y(value: u64, max: u64) -> f64 {
    DAY_BOTTOM - (DAY_BOTTOM - DAY_TOP) * value as f64 / max.max(1) as f64
}

/// The axes every per-day chart shares: the baseline, the scale's top value, and the first,
/// middle and last dates.
fn day_axes(dates: &[NaiveDate], max: u64) -> Markup {
    let n = dates.len();
    let ticks: Vec<usize> = if n <= 1 { vec![0] } else { vec![0, (n - 1) / 2, n - 1] };
    html! {
        line.axis x1=(number(DAY_LEFT)) y1=(number(DAY_BOTTOM)) x2=(number(DAY_RIGHT)) y2=(number(DAY_BOTTOM)) {}
        line.grid x1=(number(DAY_LEFT)) y1=(number(DAY_TOP)) x2=(number(DAY_RIGHT)) y2=(number(DAY_TOP)) {}
        text.scale x=(number(DAY_LEFT - 4.0)) y=(number(DAY_TOP + 4.0)) text-anchor="end" { (max) }
        text.scale x=(number(DAY_LEFT - 4.0)) y=(number(DAY_BOTTOM + 4.0)) text-anchor="end" { "0" }
        @for (k, i) in ticks.iter().enumerate() {
            @if let Some(date) = dates.get(*i) {
                @let anchor = match (k, ticks.len()) { (0, _) => "start", (k, n) if k + 1 == n => "end", _ => "middle" };
                @let x = match anchor { "start" => DAY_LEFT, "end" => DAY_RIGHT, _ => day_x(*i, n) };
                text.date x=(number(x)) y=(number(DAY_HEIGHT - 8.0)) text-anchor=(anchor) { (date.format("%b %-d")) }
            }
        }
    }
}

/// One count per day as columns: `id` names the chart, `title` says what it counts, `unit` is
/// what one count is ("notes written"); a day without any draws no column.
pub(crate) fn day_columns(id: &str, title: &str, unit: &str, class: &str, days: &[(NaiveDate, u64)]) -> Markup {
    let n = days.len();
    let max = days.iter().map(|d| d.1).max().unwrap_or(0).max(1);
    let total: u64 = days.iter().map(|d| d.1).sum();
    let step = (DAY_RIGHT - DAY_LEFT) / n.max(1) as f64;
    let width = (step * 0.8).max(1.0);
    let dates: Vec<NaiveDate> = days.iter().map(|d| d.0).collect();
    let span = match (days.first(), days.last()) {
        (Some(first), Some(last)) => format!("{} to {}", first.0, last.0),
        _ => "no days".into(),
    };
    let busiest = days.iter().max_by_key(|d| (d.1, std::cmp::Reverse(d.0))).filter(|d| d.1 > 0);
    let description = match busiest {
        Some((date, count)) => format!("{total} {unit} in all from {span}; the most on {date}: {count}."),
        None => format!("No {unit} from {span}."),
    };
    let marks = html! {
        @for (i, (date, value)) in days.iter().enumerate() {
            @if *value > 0 {
                rect class=(format!("bar {class}")) x=(number(day_x(i, n) - width / 2.0)) y=(number(day_y(*value, max)))
                    width=(number(width)) height=(number(DAY_BOTTOM - day_y(*value, max))) {
                    title { (date) ": " (value) " " (unit) }
                }
            }
        }
    };
    day_chart(id, title, &description, &dates, max, marks)
}

/// The frame every per-day chart shares: the labelled SVG, its axes, then `marks`.
fn day_chart(id: &str, title: &str, description: &str, dates: &[NaiveDate], max: u64, marks: Markup) -> Markup {
    html! {
        svg.chart #(id) xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {DAY_WIDTH} {DAY_HEIGHT}")) role="img"
            aria-labelledby=(format!("{id}-title {id}-desc")) {
            title #(format!("{id}-title")) { (title) }
            desc #(format!("{id}-desc")) { (description) }
            (day_axes(dates, max))
            (marks)
        }
    }
}

/// A level recorded on some days (`None`: nothing recorded that day) as points joined in date
/// order; days without a value draw nothing (the line between two points joins recorded days
/// only, and the description says how many days recorded it).
pub(crate) fn day_points(id: &str, title: &str, unit: &str, class: &str, days: &[(NaiveDate, Option<u64>)]) -> Markup {
    let n = days.len();
    let max = days.iter().filter_map(|d| d.1).max().unwrap_or(0).max(1);
    let dates: Vec<NaiveDate> = days.iter().map(|d| d.0).collect();
    let known: Vec<(usize, NaiveDate, u64)> = days.iter().enumerate().filter_map(|(i, (date, v))| v.map(|v| (i, *date, v))).collect();
    let line: Vec<String> = known.iter().map(|(i, _, v)| format!("{},{}", number(day_x(*i, n)), number(day_y(*v, max)))).collect();
    let description = match (known.first(), known.last()) {
        (Some(first), Some(last)) => {
            format!("Recorded on {} of {} days: {} {unit} on {}, {} on {}.", known.len(), n, first.2, first.1, last.2, last.1)
        }
        _ => format!("No receipt of these {n} days recorded {unit}."),
    };
    let marks = html! {
        @if line.len() > 1 { polyline class=(format!("trend {class}")) points=(line.join(" ")) {} }
        @for (i, date, value) in &known {
            circle class=(format!("point {class}")) cx=(number(day_x(*i, n))) cy=(number(day_y(*value, max))) r="3" {
                title { (date) ": " (value) " " (unit) }
            }
        }
    };
    day_chart(id, title, &description, &dates, max, marks)
}

/// One folder's bar: its label, the share drawn (0 to 1) and the value text.
pub(crate) struct FolderBar {
    pub label: String,
    pub share: f64,
    pub value: String,
}

/// `text` cut to `LABEL_CHARS` characters with "…".
fn cut(text: &str) -> String {
    if text.chars().count() <= LABEL_CHARS {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(LABEL_CHARS - 1).collect::<String>())
    }
}

/// Horizontal bars, one row per folder. The drawing is one image (`role="img"`), so it holds no
/// links (axe's `nested-interactive`): the table below it links each folder.
pub(crate) fn folder_bars(id: &str, title: &str, description: &str, rows: &[FolderBar]) -> Markup {
    let height = ROW_HEIGHT * rows.len().max(1) as f64 + 4.0;
    html! {
        svg.chart.rows #(id) xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {DAY_WIDTH} {}", number(height))) role="img"
            aria-labelledby=(format!("{id}-title {id}-desc")) {
            title #(format!("{id}-title")) { (title) }
            desc #(format!("{id}-desc")) { (description) }
            @for (i, row) in rows.iter().enumerate() {
                @let y = 2.0 + ROW_HEIGHT * i as f64;
                @let share = if row.share.is_finite() { row.share.clamp(0.0, 1.0) } else { 0.0 };
                g {
                    title { (row.label) ": " (row.value) }
                    text.label x="0" y=(number(y + 11.0)) { (cut(&row.label)) }
                    rect.track x=(number(BAR_LEFT)) y=(number(y + 16.0)) width=(number(BAR_WIDTH)) height="12" {}
                    @if share > 0.0 {
                        rect.bar.rot x=(number(BAR_LEFT)) y=(number(y + 16.0)) width=(number((BAR_WIDTH * share).max(1.0))) height="12" {}
                    }
                    text.value x=(number(BAR_LEFT + BAR_WIDTH + 5.0)) y=(number(y + 26.0)) { (row.value) }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(n: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 12, n).unwrap()
    }

    /// The `(x, y, width, height)` of every `<rect class="bar…">` in `svg`.
    fn bars(svg: &str) -> Vec<(f64, f64, f64, f64)> {
        svg.split("<rect class=\"bar")
            .skip(1)
            .map(|rest| {
                let attr = |name: &str| -> f64 {
                    let start = rest.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                    rest[start..].split('"').next().unwrap().parse().unwrap()
                };
                (attr("x"), attr("y"), attr("width"), attr("height"))
            })
            .collect()
    }

    #[test]
    fn columns_are_proportional_to_the_counts_and_days_without_any_draw_none() {
        let svg = day_columns("c", "Notes written", "notes written", "written", &[(day(1), 2), (day(2), 0), (day(3), 4), (day(4), 1)])
            .into_string();
        let drawn = bars(&svg);
        assert_eq!(drawn.len(), 3, "{svg}");
        let (two, four, one) = (drawn[0].3, drawn[1].3, drawn[2].3);
        assert!((four - 2.0 * two).abs() < 0.2 && (two - 2.0 * one).abs() < 0.2, "heights {two} {four} {one}");
        assert!((four - (DAY_BOTTOM - DAY_TOP)).abs() < 0.05, "the largest fills the scale: {four}");
        // Each column sits on the baseline, in date order.
        for (x, y, _, h) in &drawn {
            assert!((y + h - DAY_BOTTOM).abs() < 0.05, "{x} {y} {h}");
        }
        assert!(drawn[0].0 < drawn[1].0 && drawn[1].0 < drawn[2].0);
        assert!(svg.contains("role=\"img\"") && svg.contains("<title id=\"c-title\">Notes written</title>"), "{svg}");
        assert!(svg.contains("7 notes written in all from 2026-12-01 to 2026-12-04; the most on 2026-12-03: 4."), "{svg}");
        assert!(svg.contains("2026-12-03: 4 notes written"), "each column has its value as a tooltip: {svg}");
        assert!(svg.contains(">4</text>"), "the scale's top is the largest count: {svg}");
    }

    #[test]
    fn points_mark_only_the_days_that_recorded_a_value() {
        let svg = day_points("p", "Invalid notes", "invalid notes", "invalid", &[(day(1), Some(3)), (day(2), None), (day(3), Some(6))])
            .into_string();
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
        assert!(svg.contains("Recorded on 2 of 3 days: 3 invalid notes on 2026-12-01, 6 on 2026-12-03."), "{svg}");
        let ys: Vec<f64> = svg.split(" cy=\"").skip(1).map(|rest| rest.split('"').next().unwrap().parse().unwrap()).collect();
        assert!((ys[1] - DAY_TOP).abs() < 0.05 && ((DAY_BOTTOM - ys[0]) * 2.0 - (DAY_BOTTOM - DAY_TOP)).abs() < 0.2, "{ys:?}");
        let none = day_points("q", "Invalid notes", "invalid notes", "invalid", &[(day(1), None)]).into_string();
        assert!(!none.contains("<circle") && none.contains("No receipt of these 1 days recorded invalid notes."), "{none}");
    }

    #[test]
    fn folder_bars_are_proportional_and_hostile_names_are_escaped() {
        let rows = vec![
            FolderBar { label: "<script>alert(1)</script>".into(), share: 0.5, value: "1 of 2".into() },
            FolderBar { label: "01_Projects".into(), share: 0.25, value: "1 of 4".into() },
            FolderBar { label: "empty".into(), share: 0.0, value: "0 of 3".into() },
        ];
        let svg = folder_bars("f", "Stale by folder", "d", &rows).into_string();
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{svg}");
        let widths: Vec<f64> = svg
            .split("<rect class=\"bar rot\"")
            .skip(1)
            .map(|rest| rest.split(" width=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(widths.len(), 2, "a folder with no stale note draws no bar: {svg}");
        assert!((widths[0] - BAR_WIDTH / 2.0).abs() < 0.05 && (widths[1] - BAR_WIDTH / 4.0).abs() < 0.05, "{widths:?}");
        let long = folder_bars("g", "t", "d", &[FolderBar { label: "x".repeat(60), share: 2.0, value: "v".into() }]).into_string();
        assert!(long.contains(&format!("{}…</text>", "x".repeat(LABEL_CHARS - 1))), "long names are cut: {long}");
        let full: Vec<f64> = long
            .split("<rect class=\"bar rot\"")
            .skip(1)
            .map(|rest| rest.split(" width=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(full, vec![BAR_WIDTH], "a share above 1 is drawn full, never past the track");
    }
}
