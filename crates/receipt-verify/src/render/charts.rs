//! The report's charts, drawn with plotters' SVG backend into strings (text is left to the browser's fonts,
//! so nothing is rasterised and no font file is needed).

use plotters::prelude::*;

/// One trial on the ledger chart.
pub(crate) struct TrialPoint {
    /// Declared index.
    pub(crate) index: usize,
    /// Calibration value of the rule's metric.
    pub(crate) value: f64,
    /// Whether it fuses by a convex combination (else RRF).
    pub(crate) convex: bool,
}

/// One latency distribution.
pub(crate) struct LatencySeries {
    /// `baseline hybrid`, ...
    pub(crate) label: String,
    /// Whole-call milliseconds, any order.
    pub(crate) values: Vec<f64>,
    /// Colour index (by mode).
    pub(crate) mode: usize,
    /// Drawn faint (the baseline) or strong (the selected configuration).
    pub(crate) faint: bool,
}

const MODE_COLOURS: [RGBColor; 4] =
    [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(148, 103, 189)];

fn failed<E: std::fmt::Display>(error: E) -> String {
    format!("drawing a chart: {error}")
}

/// Calibration score per declared trial, RRF and convex apart, the baseline as a line and the winner ringed.
pub(crate) fn ledger(
    trials: &[TrialPoint],
    winner: usize,
    winner_name: &str,
    metric: &str,
) -> Result<String, String> {
    let mut svg = String::new();
    let values: Vec<f64> = trials.iter().map(|t| t.value).collect();
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !(low.is_finite() && high.is_finite()) {
        return Err("no trial values to draw".into());
    }
    let pad = ((high - low) * 0.15).max(0.005);
    // Room below the lowest trial for the legend, so that it hides no point.
    let floor = low - (high - low) * 0.7 - pad;
    let baseline = trials.first().map_or(low, |t| t.value);
    let right = trials.len() as f64 - 0.5;
    {
        let root = SVGBackend::with_string(&mut svg, (900, 380)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("Selection ledger: calibration {metric} of every declared trial"),
                ("sans-serif", 18),
            )
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..right, floor..(high + pad))
            .map_err(failed)?;
        chart
            .configure_mesh()
            .light_line_style(BLACK.mix(0.04))
            .x_desc("trial, in declared order")
            .y_desc(format!("{metric} (calibration)"))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.3}"))
            .draw()
            .map_err(failed)?;
        let grey = BLACK.mix(0.45);
        chart
            .draw_series(LineSeries::new(vec![(-0.5, baseline), (right, baseline)], grey.stroke_width(1)))
            .map_err(failed)?
            .label("baseline (trial 0)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], grey));
        for (convex, name, colour) in [
            (false, "reciprocal rank fusion", MODE_COLOURS[0]),
            (true, "convex combination", MODE_COLOURS[1]),
        ] {
            chart
                .draw_series(
                    trials
                        .iter()
                        .filter(|t| t.convex == convex)
                        .map(|t| Circle::new((t.index as f64, t.value), 4, colour.filled())),
                )
                .map_err(failed)?
                .label(name)
                .legend(move |(x, y)| Circle::new((x + 9, y), 4, colour.filled()));
        }
        if let Some(best) = trials.iter().find(|t| t.index == winner) {
            let ring = RGBColor(214, 39, 40);
            chart
                .draw_series(std::iter::once(Circle::new(
                    (best.index as f64, best.value),
                    9,
                    ring.stroke_width(3),
                )))
                .map_err(failed)?
                .label(format!("winner: trial {winner} ({winner_name})"))
                .legend(move |(x, y)| Circle::new((x + 9, y), 6, ring.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::LowerRight)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(failed)?;
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

/// Per-query scores of two runs on the same queries, with the diagonal.
pub(crate) fn scatter(
    points: &[(f64, f64)],
    x_label: &str,
    y_label: &str,
    title: &str,
) -> Result<String, String> {
    if points.is_empty() {
        return Err("no queries to draw".into());
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (520, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(-0.02f64..1.02, -0.02f64..1.02)
            .map_err(failed)?;
        chart
            .configure_mesh()
            .light_line_style(BLACK.mix(0.04))
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()
            .map_err(failed)?;
        chart.draw_series(LineSeries::new(vec![(0.0, 0.0), (1.0, 1.0)], BLACK.mix(0.4))).map_err(failed)?;
        // Many queries score the same under both (0 and 1 are common): one circle per distinct point, its
        // area growing with how many queries are there.
        let mut counted: Vec<((f64, f64), usize)> = Vec::new();
        for point in points {
            match counted
                .iter_mut()
                .find(|(p, _)| (p.0 - point.0).abs() < 1e-9 && (p.1 - point.1).abs() < 1e-9)
            {
                Some((_, count)) => *count += 1,
                None => counted.push((*point, 1)),
            }
        }
        chart
            .draw_series(counted.iter().map(|(p, count)| {
                let radius = (3.0 + 2.0 * (*count as f64).sqrt()).round() as u32;
                Circle::new(*p, radius, MODE_COLOURS[2].mix(0.5).filled())
            }))
            .map_err(failed)?;
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

/// Empirical cumulative distributions of whole-call latency, one line per (configuration, mode).
pub(crate) fn latency(series: &[LatencySeries], whole: bool) -> Result<String, String> {
    let mut sorted: Vec<Vec<f64>> = series
        .iter()
        .map(|s| {
            let mut v = s.values.clone();
            v.sort_by(f64::total_cmp);
            v
        })
        .collect();
    sorted.retain(|v| !v.is_empty());
    if sorted.is_empty() {
        return Err("no latencies to draw".into());
    }
    let mut svg = String::new();
    // The same chart over two kinds of axis: plotters types them apart.
    macro_rules! draw {
        ($x:expr) => {{
            let root = SVGBackend::with_string(&mut svg, (900, 380)).into_drawing_area();
            root.fill(&WHITE).map_err(failed)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(
                    "Whole-call latency per query (search and durable receipt), this host",
                    ("sans-serif", 18),
                )
                .margin(14)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d($x, 0.0f64..1.0)
                .map_err(failed)?;
            chart
                .configure_mesh()
                .light_line_style(BLACK.mix(0.04))
                .x_desc(if whole { "milliseconds (log scale)" } else { "milliseconds" })
                .y_desc("fraction of queries at most")
                .draw()
                .map_err(failed)?;
            for s in series.iter().filter(|s| !s.values.is_empty()) {
                let mut values = s.values.clone();
                values.sort_by(f64::total_cmp);
                let n = values.len() as f64;
                let colour = MODE_COLOURS[s.mode % MODE_COLOURS.len()];
                let style = if s.faint { colour.mix(0.4).stroke_width(2) } else { colour.stroke_width(3) };
                chart
                    .draw_series(LineSeries::new(
                        values.iter().enumerate().map(|(i, v)| (*v, (i + 1) as f64 / n)),
                        style,
                    ))
                    .map_err(failed)?
                    .label(s.label.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .position(SeriesLabelPosition::LowerRight)
                .label_font(("sans-serif", 13))
                .draw()
                .map_err(failed)?;
            root.present().map_err(failed)?;
        }};
    }
    if whole {
        // Every call, the slowest included, on a log axis: the tails are where latency claims differ.
        let low = sorted.iter().map(|v| v[0]).fold(f64::INFINITY, f64::min).max(1e-4);
        let high = sorted.iter().map(|v| v[v.len() - 1]).fold(0.0, f64::max).max(low * 2.0);
        draw!((low * 0.9..high * 1.1).log_scale());
    } else {
        // Up to twice the largest median, so that a few slow calls do not flatten every curve (the tail is in
        // the table's p95).
        let right = sorted.iter().map(|v| v[v.len() / 2]).fold(0.0, f64::max) * 2.0;
        draw!(0.0f64..right.max(0.001));
    }
    Ok(svg)
}

/// Per-query differences of one metric (candidate minus baseline), sorted, one line per run, with zero marked.
pub(crate) fn deltas(series: &[(String, usize, Vec<f64>)], metric: &str) -> Result<String, String> {
    let all: Vec<f64> = series.iter().flat_map(|(_, _, v)| v.iter().copied()).collect();
    if all.is_empty() {
        return Err("no differences to draw".into());
    }
    let bound = all.iter().fold(0.05f64, |m, v| m.max(v.abs())) * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 380)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("Per-query {metric} difference, candidate minus baseline, sorted"),
                ("sans-serif", 18),
            )
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0f64..1.0, -bound..bound)
            .map_err(failed)?;
        chart
            .configure_mesh()
            .light_line_style(BLACK.mix(0.04))
            .x_desc("fraction of queries")
            .y_desc(format!("{metric} difference"))
            .draw()
            .map_err(failed)?;
        chart.draw_series(LineSeries::new(vec![(0.0, 0.0), (1.0, 0.0)], BLACK.mix(0.45))).map_err(failed)?;
        for (label, mode, values) in series.iter().filter(|(_, _, v)| !v.is_empty()) {
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let n = sorted.len() as f64;
            let style = MODE_COLOURS[mode % MODE_COLOURS.len()].stroke_width(3);
            chart
                .draw_series(LineSeries::new(
                    sorted.iter().enumerate().map(|(i, v)| ((i as f64 + 0.5) / n, *v)),
                    style,
                ))
                .map_err(failed)?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(failed)?;
        root.present().map_err(failed)?;
    }
    Ok(svg)
}
