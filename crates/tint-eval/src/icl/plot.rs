//! Accuracy bar charts as standalone SVG (written by hand: a grouped bar chart needs no plotting
//! dependency). One group per task, one bar per table row, error bars for the seed std.

use super::report::IclReport;

const WIDTH: f64 = 1100.0;
const HEIGHT: f64 = 420.0;
const MARGIN_LEFT: f64 = 60.0;
const MARGIN_RIGHT: f64 = 380.0;
const MARGIN_TOP: f64 = 40.0;
const MARGIN_BOTTOM: f64 = 50.0;
const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f",
];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A grouped bar chart of the report's accuracies (calibrated or not) as an SVG document.
pub fn accuracy_bars_svg(report: &IclReport, calibrated: bool) -> String {
    let tasks = report.tasks();
    let rows = report.rows();
    let plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let group_w = plot_w / tasks.len().max(1) as f64;
    let bar_w = 0.8 * group_w / rows.len().max(1) as f64;
    let y_of = |acc: f64| MARGIN_TOP + plot_h * (1.0 - acc.clamp(0.0, 1.0));
    let title = if calibrated {
        "Accuracy with calibration"
    } else {
        "Accuracy without calibration"
    };
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{:.1}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{} ({})</text>\n",
        MARGIN_LEFT + plot_w / 2.0,
        title,
        escape(&report.model)
    );
    for tick in 0..=5 {
        let acc = tick as f64 / 5.0;
        let y = y_of(acc);
        svg.push_str(&format!(
            "<line x1=\"{MARGIN_LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}%</text>\n",
            MARGIN_LEFT + plot_w,
            MARGIN_LEFT - 6.0,
            y + 4.0,
            tick * 20
        ));
    }
    for (t, &task) in tasks.iter().enumerate() {
        let x0 = MARGIN_LEFT + t as f64 * group_w + 0.1 * group_w;
        for (r, row) in rows.iter().enumerate() {
            let Some(cell) = report.lookup(row, task) else {
                continue;
            };
            let (mean, std) = if calibrated {
                (cell.calibrated_mean, cell.calibrated_std)
            } else {
                (cell.accuracy_mean, cell.accuracy_std)
            };
            let x = x0 + r as f64 * bar_w;
            let y = y_of(mean);
            svg.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} k={}: {:.1}%</title></rect>\n",
                bar_w * 0.95,
                MARGIN_TOP + plot_h - y,
                PALETTE[r % PALETTE.len()],
                escape(&row.0),
                row.1,
                100.0 * mean
            ));
            if std > 0.0 {
                let xc = x + bar_w * 0.475;
                svg.push_str(&format!(
                    "<line x1=\"{xc:.1}\" x2=\"{xc:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\n",
                    y_of(mean - std),
                    y_of(mean + std)
                ));
            }
        }
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            MARGIN_LEFT + (t as f64 + 0.5) * group_w,
            HEIGHT - MARGIN_BOTTOM + 18.0,
            task.display_name()
        ));
    }
    for (r, row) in rows.iter().enumerate() {
        let y = MARGIN_TOP + 10.0 + 20.0 * r as f64;
        let x = WIDTH - MARGIN_RIGHT + 15.0;
        svg.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\">{} (k={})</text>\n",
            y - 10.0,
            PALETTE[r % PALETTE.len()],
            x + 18.0,
            y,
            escape(&row.0),
            row.1
        ));
    }
    svg.push_str("</svg>\n");
    svg
}
