//! The viewer page (`/view?dump=ID[&base=ID][&allow_mismatch=1]
//! [&group=program-frame]`) of one dump or a pair, grouped by program
//! frame by the pipeline's transform when asked (as `--group`): opened through the catalog (below their roots, never
//! out of them), built by the one pipeline in the shared symbol table, a
//! few at a time (`view_limit`), kept for the next visit (`built_cache`);
//! the work stops before symbolizing when its client left. Its links walk
//! the dump's process: previous and next dump, the diff with the previous
//! and with the first, the process's timeline. A comparison of two
//! different programs is refused, as the command line refuses it, with a
//! link that compares anyway. Errors name dumps by their ids, never by a
//! path on the server.

use crate::AppState;
use crate::catalog::Entry;
use crate::listing::process_of;
use crate::query::{Pick, checked_query};
use crate::responses::refuse;
use crate::time_views::TimeView;
use crate::urls::{url_component, url_path};
use crate::view_limit::Presence;
use crate::work::{Failure, built, cache_key, kept, listed, read_entry};
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use heapdiff::input::check_comparable;
use heapdiff::pipeline::Loaded;
use heapdiff::render::html::{self, Link};
use heapdiff::render::xml::escape_html;
use std::sync::Arc;

/// `/view?dump=ID[&base=ID][&allow_mismatch=1]`: the viewer page.
pub async fn view(
    State(state): State<Arc<AppState>>,
    uri: Uri,
    query: Result<Query<Pick>, QueryRejection>,
) -> Response {
    let pick = match checked_query(&uri, query) {
        Ok(pick) if pick.dump.is_some() => pick,
        Ok(_) => return refuse(StatusCode::BAD_REQUEST, "name a dump: ?dump=ID"),
        Err((status, why)) => return refuse(status, why),
    };
    let allow_mismatch = pick.allow_mismatch.as_deref() == Some("1");
    let by_program_frame = match pick.group.as_deref() {
        None => false,
        Some("program-frame") => true,
        Some(_) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "group=program-frame is the one grouping",
            );
        }
    };
    let (id, base) = (pick.dump.clone().unwrap_or_default(), pick.base.clone());
    let entries = match view_entries(&state, &id, base.as_deref()) {
        Ok(entries) => entries,
        Err((status, why)) => return refuse(status, &why),
    };
    let time_view = match TimeView::of(&state, &pick, &entries) {
        Ok(time_view) => time_view,
        Err((status, why)) => return refuse(status, &why),
    };
    let html_page =
        |page: Bytes| ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response();
    let read: Vec<Arc<Entry>> = entries
        .iter()
        .cloned()
        .chain(TimeView::entries(&time_view))
        .collect();
    let what = format!(
        "view {allow_mismatch} {by_program_frame}{}",
        TimeView::key(&time_view)
    );
    let key = cache_key(&what, &read);
    match kept(&state, &key, &read) {
        Ok(Some(page)) => return html_page(page),
        Ok(None) => {}
        Err((status, why)) => return refuse(status, &why),
    }
    let page = built(&state, "the view failed", move |state, presence| {
        render_view(
            state,
            presence,
            &entries,
            allow_mismatch,
            by_program_frame,
            time_view.as_ref(),
        )
    })
    .await;
    match page {
        Ok(Ok(page)) => {
            let page = Bytes::from(page);
            state.pages.put(key, page.clone());
            html_page(page)
        }
        Ok(Err(mismatch)) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            mismatch,
        )
            .into_response(),
        Err(refusal) => refusal,
    }
}

/// The listed entries of a view: the dump, then the base.
fn view_entries(
    state: &AppState,
    id: &str,
    base: Option<&str>,
) -> Result<Vec<Arc<Entry>>, Failure> {
    std::iter::once(id)
        .chain(base)
        .map(|id| listed(state, id))
        .collect()
}

/// The page of `entries` (the dump, then the base), or the page refusing a
/// comparison of two programs.
fn render_view(
    state: &AppState,
    presence: &Presence,
    entries: &[Arc<Entry>],
    allow_mismatch: bool,
    by_program_frame: bool,
    time_view: Option<&TimeView>,
) -> Result<Result<String, String>, Failure> {
    let new = read_entry(state, &entries[0])?;
    let base = entries.get(1).map(|e| read_entry(state, e)).transpose()?;
    if let Some(base) = &base
        && let Some(error) = check_comparable(&base.dump, &new.dump, allow_mismatch).error
    {
        return Ok(Err(mismatch_page(&entries[0].id, &entries[1].id, &error)));
    }
    if presence.left() {
        return Err((StatusCode::REQUEST_TIMEOUT, "the client left".to_string()));
    }
    let id = entries[0].id.clone();
    let base_id = entries.get(1).map(|e| e.id.clone());
    let new = Loaded::one(id.clone(), new);
    let base = base
        .zip(base_id.clone())
        .map(|(b, name)| Loaded::one(name, b));
    let mut settings = state.settings.clone();
    settings.allow_mismatch = allow_mismatch;
    settings.transforms.program_frames |= by_program_frame;
    if let Some(time_view) = time_view {
        time_view.settings(&mut settings);
    }
    let links = view_links(state, &id, base_id.as_deref(), allow_mismatch, time_view);
    state
        .symbols
        .with_session(new, base, &settings, |session| {
            let mut model = html::model(&session.view());
            if let Some(time_view) = time_view {
                model.title.push_str(&time_view.title());
            }
            model.links = links;
            Ok(html::page(&model))
        })
        .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))
}

/// `/view?dump=ID[&base=BASE]`.
fn view_href(id: &str, base: Option<&str>) -> String {
    let mut href = format!("/view?dump={}", url_component(id));
    if let Some(base) = base {
        href.push_str(&format!("&base={}", url_component(base)));
    }
    href
}

fn link(label: &str, href: String, rel: Option<&'static str>) -> Link {
    Link {
        label: label.to_string(),
        href,
        rel,
    }
}

/// The links of a view: the list, the process's timeline, previous and
/// next (of the new side; a comparison keeps its base), the diffs with the
/// previous and the first dump, the pprof profile.
fn view_links(
    state: &AppState,
    id: &str,
    base: Option<&str>,
    allow_mismatch: bool,
    time_view: Option<&TimeView>,
) -> Vec<Link> {
    let mut links = vec![link("all dumps", "/".into(), None)];
    let dumps = process_of(&state.catalog.snapshot(), id);
    let at = dumps.iter().position(|(d, _)| d == id);
    if time_view.is_some() {
        links.push(link("this dump", view_href(id, None), None));
    }
    if let (Some(at), Some((first, _))) = (at, dumps.first()) {
        links.push(link(
            "timeline",
            format!("/#process={}", url_component(first)),
            None,
        ));
        let base_kept = base.filter(|b| {
            // A base later than the new dump would make the walk confusing.
            dumps.iter().position(|(d, _)| d == b).is_some()
        });
        if let Some((previous, _)) = at.checked_sub(1).and_then(|p| dumps.get(p)) {
            let keep = base_kept.filter(|b| b != previous);
            links.push(link("← previous", view_href(previous, keep), Some("prev")));
        }
        if let Some((next, _)) = dumps.get(at + 1) {
            links.push(link("next →", view_href(next, base_kept), Some("next")));
        }
        if let Some((previous, _)) = at.checked_sub(1).and_then(|p| dumps.get(p)) {
            links.push(link(
                "diff with previous",
                view_href(id, Some(previous)),
                None,
            ));
        }
        if at > 0 {
            links.push(link("diff with first", view_href(id, Some(first)), None));
        }
        if base.is_none() {
            links.extend(time_links(id, &dumps, at));
        }
    }
    if let Some(base) = base {
        links.push(link("this dump alone", view_href(id, None), None));
        links.push(link("base alone", view_href(base, None), None));
    }
    let mut pprof = format!("/pprof/{}", url_path(id));
    if let Some(base) = base {
        pprof.push_str(&format!("?base={}", url_component(base)));
    }
    links.push(link("download pprof", pprof, None));
    if allow_mismatch {
        links.push(link(
            "(different programs compared)",
            view_href(id, base),
            None,
        ));
    }
    links
}

/// The time views of dump `at` of its process `dumps`, where its dump
/// carries their data: what it allocated since the previous and the first
/// dump that is still live, its temporary allocations and lifetimes.
fn time_links(id: &str, dumps: &[(String, Arc<Entry>)], at: usize) -> Vec<Link> {
    let Some(Ok(summary)) = dumps.get(at).map(|(_, e)| &e.summary) else {
        return Vec::new();
    };
    let mut links = Vec::new();
    let born_since = |since: &str| {
        format!(
            "{}&born_since={}",
            view_href(id, None),
            url_component(since)
        )
    };
    if summary.births && at > 0 {
        let (previous, first) = (&dumps[at - 1].0, &dumps[0].0);
        links.push(link(
            "allocated since previous, still live",
            born_since(previous),
            None,
        ));
        if at > 1 {
            links.push(link(
                "allocated since first, still live",
                born_since(first),
                None,
            ));
        }
    }
    if summary.lifetimes {
        links.push(link(
            "temporary allocations",
            format!("{}&view=temporary", view_href(id, None)),
            None,
        ));
        links.push(link(
            "lifetimes",
            format!("/lifetimes?dump={}", url_component(id)),
            None,
        ));
    }
    links
}

/// The refusal of a comparison of two programs, with a link that compares
/// anyway.
fn mismatch_page(id: &str, base: &str, error: &str) -> String {
    let anyway = format!("{}&allow_mismatch=1", view_href(id, Some(base)));
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>not comparable</title>\
         <link rel=\"stylesheet\" href=\"/style.css\"></head><body><main style=\"padding:10px\">\
         <h1 style=\"font-size:15px\">{} and {} are not comparable</h1><p id=\"refusal\">{}</p>\
         <p><a id=\"compare-anyway\" href=\"{}\">compare anyway</a> · <a href=\"/\">all dumps</a></p>\
         </main></body></html>",
        escape_html(base),
        escape_html(id),
        escape_html(error),
        escape_html(&anyway)
    )
}
