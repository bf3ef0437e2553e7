//! `toolsize layers`: the built-in catalog of truncation layers, as a table or JSON.
//!
//! Filters combine (all must match): `--unit` and `--action` take the catalog's names exactly,
//! `--product` a case-insensitive substring. A filter value that matches nothing the catalog
//! knows exits 2 with a structured error listing the valid values; filters that are each valid
//! but match no layer together print an empty table (or `[]`).

use std::io::Write;
use std::process::ExitCode;

use super::CliError;
use crate::layers::{self, Action, Layer, Unit};

/// Arguments of `toolsize layers`.
#[derive(Debug, clap::Args)]
pub struct LayersArgs {
    /// Print the layers as a JSON array, with every fact (source, markers, knob…).
    #[arg(long)]
    pub json: bool,
    /// Only layers counting in this unit: bytes, chars, utf16_units, tokens, lines, depth, items.
    #[arg(long, value_name = "UNIT")]
    pub unit: Option<String>,
    /// Only layers of products whose name contains this text (case-insensitive).
    #[arg(long, value_name = "TEXT")]
    pub product: Option<String>,
    /// Only layers with this action: truncate_marked, truncate_silent, spill_preview,
    /// spill_pointer, reject, drop, warn, not_indexed, unknown.
    #[arg(long, value_name = "ACTION")]
    pub action: Option<String>,
}

fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> String {
    all.iter().map(|&x| name(x)).collect::<Vec<_>>().join(", ")
}

/// Runs `toolsize layers`.
pub fn run(args: &LayersArgs) -> ExitCode {
    let unit = match args.unit.as_deref().map(|u| (u, Unit::parse(u))) {
        None => None,
        Some((_, Some(u))) => Some(u),
        Some((u, None)) => {
            return CliError::new(
                "UNKNOWN_UNIT",
                format!(
                    "unknown unit {u:?}; expected one of: {}",
                    names(&Unit::ALL, Unit::as_str)
                ),
            )
            .report()
        }
    };
    let action = match args.action.as_deref().map(|a| (a, Action::parse(a))) {
        None => None,
        Some((_, Some(a))) => Some(a),
        Some((a, None)) => {
            return CliError::new(
                "UNKNOWN_ACTION",
                format!(
                    "unknown action {a:?}; expected one of: {}",
                    names(&Action::ALL, Action::as_str)
                ),
            )
            .report()
        }
    };
    let product = args.product.as_deref().map(str::to_lowercase);
    let catalog = layers::catalog();
    if let Some(p) = &product {
        if !catalog.iter().any(|l| l.product.to_lowercase().contains(p)) {
            return CliError::new(
                "UNKNOWN_PRODUCT",
                format!(
                    "no product in the catalog matches {p:?}; `toolsize layers` lists them all"
                ),
            )
            .report();
        }
    }
    let selected: Vec<&Layer> = catalog
        .iter()
        .filter(|l| unit.is_none_or(|u| l.unit == u))
        .filter(|l| action.is_none_or(|a| l.action == a))
        .filter(|l| {
            product
                .as_deref()
                .is_none_or(|p| l.product.to_lowercase().contains(p))
        })
        .collect();

    let mut out = std::io::stdout().lock();
    let written = if args.json {
        match serde_json::to_string_pretty(&selected) {
            Ok(text) => writeln!(out, "{text}"),
            Err(e) => return CliError::new("INTERNAL", e.to_string()).report(),
        }
    } else {
        write_table(&mut out, &selected)
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => CliError::new("STDOUT_UNWRITABLE", e.to_string()).report(),
    }
}

fn write_table(out: &mut impl Write, layers: &[&Layer]) -> std::io::Result<()> {
    const HEADER: [&str; 6] = ["ID", "PRODUCT", "LIMIT", "UNIT", "SCOPE", "ACTION"];
    let rows: Vec<[String; 6]> = layers
        .iter()
        .map(|l| {
            [
                l.id.clone(),
                l.product.clone(),
                l.limit.to_string(),
                l.unit.to_string(),
                l.scope.to_string(),
                l.action.to_string(),
            ]
        })
        .collect();
    let mut widths = HEADER.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |out: &mut dyn Write, cells: [&str; 6]| -> std::io::Result<()> {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i == 2 {
                text.push_str(&format!("{cell:>w$}  "));
            } else if i == 5 {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<w$}  "));
            }
        }
        writeln!(out, "{text}")
    };
    line(out, HEADER)?;
    for row in &rows {
        line(out, row.each_ref().map(String::as_str))?;
    }
    Ok(())
}
