//! Markdown tables and how a benchmark hands its section to `cargo xtask bench`.

use std::fmt::Write as _;

/// The environment variable naming the file a benchmark writes its markdown section to
/// (set by `cargo xtask bench`); the section is printed to stdout either way.
pub const OUT_ENV: &str = "TOLLGATE_BENCH_OUT";

/// A markdown table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are left empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as aligned GitHub markdown.
    pub fn to_markdown(&self) -> String {
        let n = self.headers.len();
        let cell = |row: &[String], i: usize| row.get(i).cloned().unwrap_or_default();
        let widths: Vec<usize> = (0..n)
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| cell(r, i).chars().count())
                    .chain([self.headers[i].chars().count(), 3])
                    .max()
                    .unwrap_or(3)
            })
            .collect();
        let line = |cells: Vec<String>| {
            let mut s = String::from("|");
            for (c, w) in cells.iter().zip(&widths) {
                let _ = write!(s, " {c:<w$} |");
            }
            s.push('\n');
            s
        };
        let mut out = line(self.headers.clone());
        out += &line(widths.iter().map(|w| "-".repeat(*w)).collect());
        for r in &self.rows {
            out += &line((0..n).map(|i| cell(r, i)).collect());
        }
        out
    }
}

/// A benchmark's section of `docs/benchmarks.md`: a heading, what was run, the table, and
/// notes that define the columns.
#[derive(Debug, Clone, Default)]
pub struct Section {
    /// The heading (without `##`).
    pub title: String,
    /// Paragraphs before the table.
    pub intro: Vec<String>,
    /// The table.
    pub table: Table,
    /// Bullet points after the table.
    pub notes: Vec<String>,
}

impl Section {
    /// The section as markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("## {}\n\n", self.title);
        for p in &self.intro {
            out += p;
            out += "\n\n";
        }
        out += &self.table.to_markdown();
        if !self.notes.is_empty() {
            out.push('\n');
            for n in &self.notes {
                out += &format!("- {n}\n");
            }
        }
        out
    }

    /// Prints the section, and writes it to the file named by [`OUT_ENV`] if set.
    pub fn emit(&self) {
        let md = self.to_markdown();
        println!("\n{md}");
        if let Ok(path) = std::env::var(OUT_ENV)
            && let Err(e) = std::fs::write(&path, &md)
        {
            eprintln!("could not write {path}: {e}");
            std::process::exit(1);
        }
    }
}

/// Prints several sections as one, and writes them to the file named by [`OUT_ENV`] if
/// set (a benchmark that reports more than one table).
pub fn emit_all(sections: &[Section]) {
    let md = sections
        .iter()
        .map(Section::to_markdown)
        .collect::<Vec<_>>()
        .join("\n");
    println!("\n{md}");
    if let Ok(path) = std::env::var(OUT_ENV)
        && let Err(e) = std::fs::write(&path, &md)
    {
        eprintln!("could not write {path}: {e}");
        std::process::exit(1);
    }
}

/// A ratio with two decimals, or `–` when undefined.
pub fn ratio(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "–".to_owned()
    }
}

/// A number with `digits` decimals, or `–` when undefined.
pub fn num(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "–".to_owned()
    }
}

/// Seconds with one decimal, or `never` for `None`.
pub fn secs(d: Option<std::time::Duration>) -> String {
    d.map_or_else(
        || "never".to_owned(),
        |d| format!("{:.1} s", d.as_secs_f64()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(&["a", "long header"]);
        t.row(vec!["wide cell".into(), "1".into()]);
        assert_eq!(
            t.to_markdown(),
            "| a         | long header |\n| --------- | ----------- |\n| wide cell | 1           |\n"
        );
    }
}
