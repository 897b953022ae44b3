//! The Markdown tables the benchmarks print (and `docs/benchmarks.md`
//! quotes): a header, an alignment row, one line per figure.

use std::fmt::Write as _;

/// How a column's cells align.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Left-aligned (`---`): names and labels.
    Left,
    /// Right-aligned (`---:`): numbers.
    Right,
}

/// A Markdown table under construction.
#[derive(Clone, Debug)]
pub struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with no rows and these columns: header text and alignment, left to right.
    #[must_use]
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table { columns: columns.iter().map(|&(name, align)| (name.to_owned(), align)).collect(), rows: Vec::new() }
    }

    /// Add a row.
    ///
    /// # Panics
    ///
    /// Unless it has one cell per column (a bug of the caller).
    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(cells.len(), self.columns.len(), "a row of {cells:?} in a table of {} columns", self.columns.len());
        self.rows.push(cells);
    }

    /// The table, every line ending in a newline.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut text = String::from("|");
            for cell in cells {
                let _ = write!(text, " {cell} |");
            }
            text.push('\n');
            text
        };
        let mut out = line(&mut self.columns.iter().map(|(name, _)| name.as_str()));
        out.push('|');
        for (_, align) in &self.columns {
            out.push_str(match align {
                Align::Left => "---|",
                Align::Right => "---:|",
            });
        }
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(&mut row.iter().map(String::as_str)));
        }
        out
    }
}

/// A ratio cell: `1.23 (higher is better)`.
#[must_use]
pub fn ratio_cell(ratio: f64, higher_is_better: bool) -> String {
    let better = if higher_is_better { "higher is better" } else { "lower is better" };
    format!("{ratio:.2} ({better})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_layout() {
        let mut table = Table::new(&[("what", Align::Left), ("value", Align::Right)]);
        table.row(vec!["a".into(), "1".into()]);
        table.row(vec![String::new(), "2".into()]);
        assert_eq!(table.to_markdown(), "| what | value |\n|---|---:|\n| a | 1 |\n|  | 2 |\n");
        assert_eq!(ratio_cell(2.0 / 3.0, false), "0.67 (lower is better)");
    }
}
