//! `paravault web` through its Router without a socket (tower's `oneshot`): every page's status
//! codes (200/302/303/400/403/404/405/413/429), the security headers, login and its rate limit,
//! CSRF refusals, a hostile note rendered inert, a person approving and applying a proposal an
//! agent made, a rejection that binds, an edit that becomes a proposal, and the bind check.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode, header};
use paravault::Vault;
use paravault::approvals::{ApprovalChannel, ProposalState, secrets};
use paravault::web::{self, WebOptions};
use tower::ServiceExt;

use crate::support::{note, options, vault};

const SECRET: &str = "correct horse battery staple";
const HUMAN_PROJECTS: &str = "-- .paravault/policy.yaml --\napprovals:\n  rules:\n    - { operations: [apply, archive], paths: [\"01_Projects/**\"], approver: human }\n";

struct Site {
    dir: tempfile::TempDir,
    _config: tempfile::TempDir,
    app: Router,
}

fn web_options(config: &std::path::Path, read_only: bool) -> WebOptions {
    WebOptions {
        bind: SocketAddr::from(([127, 0, 0, 1], 0)),
        read_only,
        approvers_dir: config.to_path_buf(),
        request_timeout: Duration::from_secs(30),
        login_attempts_per_minute: 5,
        public_hosts: Vec::new(),
        max_connections: 128,
        max_connections_per_client: 32,
    }
}

/// A vault with `fixture` plus two notes, an approver `alice`, and its web Router.
fn site(fixture: &str, read_only: bool, with_approver: bool) -> Site {
    let fixture = format!(
        "{fixture}-- 01_Projects/plan.md --\n{}-- 03_Resources/linker.md --\n{}",
        note("Project", "Plan", "The plan body mentions zebras.\n"),
        note("Resource", "Linker", "See [the plan](../01_Projects/plan.md).\n")
    );
    let (dir, vault) = vault(&fixture);
    vault.sync_vault(&paravault::retrieval::SyncParams::default()).unwrap();
    let config = tempfile::tempdir().unwrap();
    if with_approver {
        secrets::add_approver(config.path(), "alice", SECRET).unwrap();
    }
    let app = web::router(vault, &web_options(config.path(), read_only));
    Site { dir, _config: config, app }
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

impl Answer {
    fn location(&self) -> &str {
        self.headers.get(header::LOCATION).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    /// The `paravault_session=…` pair of the response's cookie.
    fn session_cookie(&self) -> Option<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|c| c.starts_with("paravault_session=") && !c.starts_with("paravault_session=;"))
            .map(|c| c.split(';').next().unwrap().to_string())
    }

    fn csrf(&self) -> String {
        let at = self.body.find("name=\"csrf\" value=\"").expect("a form with a CSRF token") + "name=\"csrf\" value=\"".len();
        self.body[at..at + 64].to_string()
    }
}

/// Sends `request` through the Router, naming the server's own host when it names none (a
/// request without `Host` is refused; `raw_http_*` test that).
async fn send(app: &Router, mut request: Request<Body>) -> Answer {
    if !request.headers().contains_key(header::HOST) {
        request.headers_mut().insert(header::HOST, header::HeaderValue::from_static("127.0.0.1:8742"));
    }
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    Answer { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
}

async fn get(app: &Router, uri: &str, cookie: Option<&str>) -> Answer {
    let mut request = Request::get(uri);
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, cookie);
    }
    send(app, request.body(Body::empty()).unwrap()).await
}

fn form(fields: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish()
}

async fn post(app: &Router, uri: &str, cookie: Option<&str>, fields: &[(&str, &str)]) -> Answer {
    let mut request = Request::post(uri).header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, cookie);
    }
    send(app, request.body(Body::from(form(fields))).unwrap()).await
}

/// Logs in as alice; the logged-in session's cookie and CSRF token.
pub(crate) async fn log_in(app: &Router) -> (String, String) {
    let form_page = get(app, "/login", None).await;
    assert_eq!(form_page.status, StatusCode::OK);
    let anonymous = form_page.session_cookie().expect("the login form starts a session");
    let done = post(app, "/login", Some(&anonymous), &[("csrf", &form_page.csrf()), ("approver", "alice"), ("secret", SECRET)]).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(done.location(), "/");
    let cookie = done.session_cookie().expect("a new session on login");
    assert_ne!(cookie, anonymous, "the session id changes at login");
    let set_cookie = done.headers.get(header::SET_COOKIE).unwrap().to_str().unwrap().to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie} lacks {attribute}");
    }
    assert!(!set_cookie.contains("Secure"), "no Secure on loopback (no TLS there)");
    let dashboard = get(app, "/", Some(&cookie)).await;
    assert_eq!(dashboard.status, StatusCode::OK);
    (cookie, dashboard.csrf())
}

#[tokio::test]
async fn every_page_answers_with_its_status_code_and_the_security_headers() {
    let site = site("", false, true);
    let app = &site.app;
    // Without a login every page sends the visitor to /login; a POST is refused.
    let anonymous = get(app, "/", None).await;
    assert_eq!((anonymous.status, anonymous.location()), (StatusCode::FOUND, "/login"));
    for uri in ["/charts", "/switch?q=pl", "/switch/titles?q=pl"] {
        assert_eq!(get(app, uri, None).await.location(), "/login", "{uri} needs a login");
    }
    // The one script holds no vault data: it is served like the stylesheet, with its type.
    let script = get(app, "/static/app.js", None).await;
    assert_eq!(script.status, StatusCode::OK);
    assert_eq!(script.headers.get(header::CONTENT_TYPE).unwrap(), "text/javascript; charset=utf-8");
    assert!(script.body.contains("/switch/titles?q="), "{}", script.body);
    assert_eq!(get(app, "/note/01_Projects/plan.md", None).await.status, StatusCode::FOUND);
    assert_eq!(post(app, "/logout", None, &[]).await.status, StatusCode::FORBIDDEN);
    let refused = post(app, "/login", None, &[("approver", "alice"), ("secret", SECRET)]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "a login without its form's CSRF token is refused");
    let (cookie, _) = log_in(app).await;
    let c = Some(cookie.as_str());
    let zeros = "0".repeat(64);
    for (uri, status) in [
        ("/", StatusCode::OK),
        ("/static/style.css", StatusCode::OK),
        ("/static/app.js", StatusCode::OK),
        ("/charts", StatusCode::OK),
        ("/switch", StatusCode::OK),
        ("/switch?q=pl", StatusCode::OK),
        ("/switch/titles?q=pl", StatusCode::OK),
        ("/browse", StatusCode::OK),
        ("/browse/01_Projects", StatusCode::OK),
        ("/browse/01_Projects?page=1", StatusCode::OK),
        ("/browse/01_Projects?page=2", StatusCode::NOT_FOUND),
        ("/browse/01_Projects?page=0", StatusCode::BAD_REQUEST),
        ("/browse/01_Projects?sort=size", StatusCode::BAD_REQUEST),
        ("/browse/01_Projects?q=plan&sort=title", StatusCode::OK),
        ("/tags", StatusCode::OK),
        ("/tags/anything", StatusCode::OK),
        ("/graph", StatusCode::OK),
        ("/graph?note=01_Projects/plan.md", StatusCode::OK),
        ("/graph?note=01_Projects/missing.md", StatusCode::NOT_FOUND),
        ("/graph?note=../x.md", StatusCode::BAD_REQUEST),
        ("/favicon.svg", StatusCode::OK),
        ("/file/01_Projects/plan.md", StatusCode::NOT_FOUND),
        ("/file/01_Projects/missing.png", StatusCode::NOT_FOUND),
        ("/file/%2e%2e/secret.png", StatusCode::BAD_REQUEST),
        ("/browse/02_Areas/nothing", StatusCode::NOT_FOUND),
        ("/note/01_Projects/plan.md", StatusCode::OK),
        ("/note/01_Projects/missing.md", StatusCode::NOT_FOUND),
        ("/note/%2e%2e/%2e%2e/etc/passwd", StatusCode::BAD_REQUEST),
        ("/note/01_Projects/%00x.md", StatusCode::BAD_REQUEST),
        ("/note/.paravault/receipts.jsonl", StatusCode::NOT_FOUND),
        ("/edit/01_Projects/plan.md", StatusCode::OK),
        ("/edit/01_Projects/missing.md", StatusCode::NOT_FOUND),
        ("/search", StatusCode::OK),
        ("/search?q=zebras&mode=fts", StatusCode::OK),
        ("/search?q=zebras&mode=telepathy", StatusCode::BAD_REQUEST),
        ("/search?q=zebras&max=many", StatusCode::BAD_REQUEST),
        ("/proposals", StatusCode::OK),
        ("/proposals?state=pending", StatusCode::OK),
        ("/proposals?state=bogus", StatusCode::BAD_REQUEST),
        ("/proposals/not-an-id", StatusCode::BAD_REQUEST),
        (&format!("/proposals/{zeros}"), StatusCode::NOT_FOUND),
        ("/receipts", StatusCode::OK),
        ("/receipts?limit=0", StatusCode::BAD_REQUEST),
        ("/tasks", StatusCode::OK),
        ("/maintenance", StatusCode::OK),
        ("/no/such/page", StatusCode::NOT_FOUND),
    ] {
        let answer = get(app, uri, c).await;
        assert_eq!(answer.status, status, "GET {uri}: {}", answer.body);
        let h = |name: header::HeaderName| answer.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        assert_eq!(h(header::CONTENT_SECURITY_POLICY), web::CONTENT_SECURITY_POLICY, "GET {uri}");
        assert_eq!(h(header::X_FRAME_OPTIONS), "DENY", "GET {uri}");
        assert_eq!(h(header::X_CONTENT_TYPE_OPTIONS), "nosniff", "GET {uri}");
    }
    // Following live is the person's choice: only then does the page reload itself.
    assert!(!get(app, "/", c).await.body.contains("http-equiv=\"refresh\""));
    let live = get(app, "/?live=1", c).await;
    assert!(live.body.contains("<meta http-equiv=\"refresh\" content=\"20\">") && live.body.contains("Stop following"), "{}", live.body);
    let pending_live = get(app, "/proposals?state=pending&live=1", c).await;
    assert!(
        pending_live.body.contains("http-equiv=\"refresh\"")
            && pending_live.body.contains("href=\"/proposals?state=pending\">Stop following"),
        "{}",
        pending_live.body
    );
    let search = get(app, "/search?q=zebras&mode=fts", c).await;
    assert!(search.body.contains("01_Projects/plan.md"), "{}", search.body);
    assert!(search.body.contains("id=\"actual-mode\">fts<"), "the mode actually run is shown");
    assert!(search.body.contains("id=\"generation\""), "the generation is shown");
    let plan = get(app, "/note/01_Projects/plan.md", c).await;
    assert!(plan.body.contains("03_Resources/linker.md"), "backlinks are listed");
    assert!(plan.body.contains("<th scope=\"row\">title</th><td>Plan</td>"), "frontmatter is shown as data: {}", plan.body);
    // Method and size limits.
    let delete = send(app, Request::delete("/").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(delete.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(post(app, "/search", c, &[]).await.status, StatusCode::METHOD_NOT_ALLOWED);
    // Over 6 x note_bytes_max (1 MiB by default) + 16 KiB: an edit and its base, form-encoded.
    let huge = "x".repeat(7 * 1024 * 1024);
    let too_large = post(app, "/edit/01_Projects/plan.md", c, &[("content", &huge)]).await;
    assert_eq!(too_large.status, StatusCode::PAYLOAD_TOO_LARGE);
    let malformed = send(
        app,
        Request::post("/proposals/0000/decide")
            .header(header::COOKIE, &cookie)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from("{}"))
            .unwrap(),
    )
    .await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST, "a body that is not a form is a bad request");
}

#[tokio::test]
async fn state_changing_requests_without_the_sessions_csrf_token_are_refused() {
    let site = site(HUMAN_PROJECTS, false, true);
    let app = &site.app;
    let vault = Vault::open(site.dir.path(), options()).unwrap();
    let proposal = vault.propose_memory_change("01_Projects/plan.md", &note("Project", "Plan", "v2\n"), None, None).unwrap();
    let (cookie, csrf) = log_in(app).await;
    let uri = format!("/proposals/{}/decide", proposal.proposal_id);
    for fields in [vec![("decision", "approve")], vec![("decision", "approve"), ("csrf", &"f".repeat(64))]] {
        let forged = post(app, &uri, Some(&cookie), &fields).await;
        assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
        assert!(forged.body.contains("CSRF"));
    }
    // Another session's token does not work either.
    let (_, other_csrf) = log_in(app).await;
    assert_eq!(post(app, &uri, Some(&cookie), &[("decision", "approve"), ("csrf", &other_csrf)]).await.status, StatusCode::FORBIDDEN);
    assert_eq!(post(app, "/logout", Some(&cookie), &[]).await.status, StatusCode::FORBIDDEN);
    assert_eq!(vault.proposal_status(&proposal.proposal_id).unwrap().state, ProposalState::Pending, "nothing was decided");
    // With the token the same request decides; a second decision is refused.
    let decided = post(app, &uri, Some(&cookie), &[("decision", "approve"), ("csrf", &csrf), ("comment", "ok")]).await;
    assert_eq!(decided.status, StatusCode::SEE_OTHER, "{}", decided.body);
    let again = post(app, &uri, Some(&cookie), &[("decision", "reject"), ("csrf", &csrf)]).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.body.contains("already_decided"));
    assert_eq!(post(app, &uri, Some(&cookie), &[("decision", "maybe"), ("csrf", &csrf)]).await.status, StatusCode::BAD_REQUEST);
    // Logging out ends the session.
    let out = post(app, "/logout", Some(&cookie), &[("csrf", &csrf)]).await;
    assert_eq!((out.status, out.location()), (StatusCode::SEE_OTHER, "/login"));
    assert_eq!(get(app, "/", Some(&cookie)).await.status, StatusCode::FOUND);
}

#[tokio::test]
async fn login_attempts_are_rate_limited_per_client() {
    let site = site("", false, true);
    let app = &site.app;
    let form_page = get(app, "/login", None).await;
    let cookie = form_page.session_cookie().unwrap();
    let csrf = form_page.csrf();
    let attempt = |ip: [u8; 4]| {
        let mut request = Request::post("/login")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::COOKIE, &cookie)
            .body(Body::from(form(&[("csrf", &csrf), ("approver", "alice"), ("secret", "wrong secret here")])))
            .unwrap();
        request.extensions_mut().insert(ConnectInfo(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), 40000)));
        request
    };
    for _ in 0..5 {
        let refused = send(app, attempt([10, 0, 0, 7])).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "a wrong secret is refused");
        assert!(refused.body.contains("refused"));
    }
    let limited = send(app, attempt([10, 0, 0, 7])).await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = limited.headers.get(header::RETRY_AFTER).unwrap().to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "Retry-After {wait}");
    // Another client is not limited by the first one's attempts.
    assert_eq!(send(app, attempt([10, 0, 0, 8])).await.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_hostile_note_renders_inert() {
    let hostile = note(
        "Resource",
        "Hostile",
        "# Title\n\n<script>document.title='pwned'</script>\n\n<img src=x onerror=\"document.title='pwned'\">\n\n\
         [click](javascript:document.title='pwned') and <a href=\"javascript:alert(1)\" onclick=\"alert(1)\">raw</a>\n\n\
         <iframe src=\"https://example.com\"></iframe> <svg onload=alert(1)></svg>\n\n[fine](https://example.com/ok)\n",
    );
    let site = site(&format!("-- 03_Resources/hostile.md --\n{hostile}"), false, true);
    let (cookie, _) = log_in(&site.app).await;
    let page = get(&site.app, "/note/03_Resources/hostile.md", Some(&cookie)).await;
    assert_eq!(page.status, StatusCode::OK);
    let start = page.body.find("id=\"note-body\"").unwrap();
    let rendered = &page.body[start..page.body[start..].find("</section>").unwrap() + start];
    // Escaped text never holds '<': every '<' opens real markup, and none of it is active.
    for tag in rendered.split('<').skip(1).map(|rest| rest.split('>').next().unwrap_or("")) {
        let name = tag.trim_start_matches('/').split([' ', '/']).next().unwrap_or("").to_lowercase();
        assert!(["h1", "p", "a", "div", "section"].contains(&name.as_str()), "unexpected markup <{tag}> in {rendered}");
        let lower = tag.to_lowercase();
        assert!(!lower.contains(" on") && !lower.contains("javascript:"), "active attribute in <{tag}>: {rendered}");
    }
    assert!(rendered.contains("&lt;script&gt;"), "raw HTML is shown as text: {rendered}");
    assert!(rendered.contains("href=\"https://example.com/ok\""), "ordinary links keep working: {rendered}");
    assert!(rendered.contains("<h1>Title</h1>"), "Markdown is rendered: {rendered}");
    assert_eq!(scripts_of(&page.body), vec![APP_SCRIPT], "no page carries a script but the app's own file");
}

#[tokio::test]
async fn a_person_approves_in_the_browser_and_the_receipt_names_them_a_rejection_binds() {
    let site = site(HUMAN_PROJECTS, false, true);
    let app = &site.app;
    let agent = Vault::open(site.dir.path(), options()).unwrap().acting_for(paravault::vault::Channel::Agent);
    let wanted = note("Project", "Plan", "The plan body mentions zebras and lions.\n");
    let proposal = agent.propose_memory_change("01_Projects/plan.md", &wanted, None, None).unwrap();
    let as_map = |p: &paravault::write::operations::Proposal| -> std::collections::BTreeMap<String, serde_json::Value> {
        serde_json::from_value(serde_json::to_value(p).unwrap()).unwrap()
    };
    assert_eq!(agent.apply_memory_change(&as_map(&proposal), true).unwrap_err().code(), "human_approval_required");
    let (cookie, csrf) = log_in(app).await;
    let dashboard = get(app, "/", Some(&cookie)).await;
    assert!(dashboard.body.contains("id=\"pending-count\">1<"), "the dashboard counts the pending approval");
    assert!(dashboard.body.contains(&proposal.proposal_id[..12]));
    let review = get(app, &format!("/proposals/{}", proposal.proposal_id), Some(&cookie)).await;
    assert_eq!(review.status, StatusCode::OK);
    assert!(review.body.contains("+ The plan body mentions zebras and lions."), "the diff shows the after-image: {}", review.body);
    assert!(review.body.contains("- The plan body mentions zebras."), "the diff shows the before-image");
    assert!(review.body.contains("id=\"gate-verdict\">passes<"), "the lint gate's verdict is shown");
    assert!(review.body.contains("<td>agent via MCP</td>"), "the proposer is the one stored with the proposal: {}", review.body);
    assert!(review.body.contains("id=\"approve\""));
    let approved = post(
        app,
        &format!("/proposals/{}/decide", proposal.proposal_id),
        Some(&cookie),
        &[("csrf", &csrf), ("decision", "approve"), ("comment", "reviewed in the browser")],
    )
    .await;
    assert_eq!((approved.status, approved.location()), (StatusCode::SEE_OTHER, format!("/proposals/{}", proposal.proposal_id).as_str()));
    let status = agent.proposal_status(&proposal.proposal_id).unwrap();
    let decision = status.decision.unwrap();
    assert_eq!(
        (decision.approver.as_str(), decision.channel, decision.comment.as_str()),
        ("alice", ApprovalChannel::Web, "reviewed in the browser")
    );
    // The agent's next apply succeeds and its receipt names the person and the channel.
    let receipt = agent.apply_memory_change(&as_map(&proposal), true).unwrap().to_value();
    assert_eq!((receipt["approval"]["approver"].as_str(), receipt["approval"]["channel"].as_str()), (Some("alice"), Some("web")));
    assert_eq!(std::fs::read_to_string(site.dir.path().join("01_Projects/plan.md")).unwrap(), wanted);
    // Applied, and later after the note moved on (an edit outside the engine), the proposal is
    // still applied (never stale) and still shows its diff, from the text it replaced.
    for moment in ["just applied", "after the note moved on"] {
        if moment == "after the note moved on" {
            std::fs::write(site.dir.path().join("01_Projects/plan.md"), note("Project", "Plan", "Moved on.\n")).unwrap();
        }
        let shown = get(app, &format!("/proposals/{}", proposal.proposal_id), Some(&cookie)).await;
        assert!(shown.body.contains("id=\"state\">applied<"), "{moment}: {}", shown.body);
        assert!(shown.body.contains("id=\"before-kept\""), "{moment}: {}", shown.body);
        assert!(
            shown.body.contains("- The plan body mentions zebras.") && shown.body.contains("+ The plan body mentions zebras and lions."),
            "{moment}: the diff is kept: {}",
            shown.body
        );
        assert_eq!(agent.proposal_status(&proposal.proposal_id).unwrap().state, ProposalState::Applied, "{moment}");
    }
    std::fs::write(site.dir.path().join("01_Projects/plan.md"), &wanted).unwrap();
    let receipts = get(app, "/receipts", Some(&cookie)).await;
    assert!(receipts.body.contains("<td>alice</td><td>web</td>"), "the receipts page names the approver: {}", receipts.body);
    assert!(receipts.body.contains("verified"));

    // A rejection: the person rejects, the agent's apply fails with proposal_rejected, and the
    // web's apply refuses it too.
    let second = agent.propose_memory_change("01_Projects/plan.md", &note("Project", "Plan", "Delete the lions.\n"), None, None).unwrap();
    let rejected = post(
        app,
        &format!("/proposals/{}/decide", second.proposal_id),
        Some(&cookie),
        &[("csrf", &csrf), ("decision", "reject"), ("comment", "no")],
    )
    .await;
    assert_eq!(rejected.status, StatusCode::SEE_OTHER);
    assert_eq!(agent.apply_memory_change(&as_map(&second), true).unwrap_err().code(), "proposal_rejected");
    let web_apply = post(app, &format!("/proposals/{}/apply", second.proposal_id), Some(&cookie), &[("csrf", &csrf)]).await;
    assert_eq!(web_apply.status, StatusCode::CONFLICT);
    assert!(web_apply.body.contains("proposal_rejected"));
    assert_eq!(std::fs::read_to_string(site.dir.path().join("01_Projects/plan.md")).unwrap(), wanted, "nothing was written");
    let listed = get(app, "/proposals?state=rejected", Some(&cookie)).await;
    assert!(listed.body.contains(&second.proposal_id[..12]));
}

#[tokio::test]
async fn an_edit_becomes_a_proposal_that_the_person_approves_and_applies_from_the_web() {
    let site = site(HUMAN_PROJECTS, false, true);
    let app = &site.app;
    let (cookie, csrf) = log_in(app).await;
    let edit = get(app, "/edit/01_Projects/plan.md", Some(&cookie)).await;
    let sha_at = edit.body.find("name=\"expected_sha256\" value=\"").unwrap() + "name=\"expected_sha256\" value=\"".len();
    let sha = edit.body[sha_at..sha_at + 64].to_string();
    let edited = note("Project", "Plan", "Edited in the browser.\r\n");
    // A stale base version is a conflict, not a silent overwrite.
    let stale = post(
        app,
        "/edit/01_Projects/plan.md",
        Some(&cookie),
        &[("csrf", &csrf), ("content", &edited), ("expected_sha256", &"0".repeat(64))],
    )
    .await;
    assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.body);
    assert!(
        stale.body.contains("<textarea id=\"content\" name=\"content\">") && stale.body.contains("Edited in the browser."),
        "the typed text is kept: {}",
        stale.body
    );
    assert!(
        stale.body.contains("<span class=\"add\">+ Edited in the browser.</span>"),
        "the diff shows the person's lines: {}",
        stale.body
    );
    assert!(stale.body.contains(&format!("name=\"expected_sha256\" value=\"{sha}\"")), "resubmitting is based on the current version");
    let forged = post(app, "/edit/01_Projects/plan.md", Some(&cookie), &[("content", &edited), ("expected_sha256", &sha)]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let proposed =
        post(app, "/edit/01_Projects/plan.md", Some(&cookie), &[("csrf", &csrf), ("content", &edited), ("expected_sha256", &sha)]).await;
    assert_eq!(proposed.status, StatusCode::SEE_OTHER, "{}", proposed.body);
    let id = proposed.location().strip_prefix("/proposals/").unwrap().to_string();
    assert!(!std::fs::read_to_string(site.dir.path().join("01_Projects/plan.md")).unwrap().contains("Edited"), "proposing writes nothing");
    assert!(get(app, &format!("/proposals/{id}"), Some(&cookie)).await.body.contains("<td>human via the web UI</td>"));
    // Applying before the decision is refused; after approval it writes, naming the approver.
    let early = post(app, &format!("/proposals/{id}/apply"), Some(&cookie), &[("csrf", &csrf)]).await;
    assert_eq!(early.status, StatusCode::CONFLICT);
    assert!(early.body.contains("human_approval_required"));
    assert_eq!(
        post(app, &format!("/proposals/{id}/decide"), Some(&cookie), &[("csrf", &csrf), ("decision", "approve")]).await.status,
        StatusCode::SEE_OTHER
    );
    let applied = post(app, &format!("/proposals/{id}/apply"), Some(&cookie), &[("csrf", &csrf)]).await;
    assert_eq!(applied.status, StatusCode::SEE_OTHER, "{}", applied.body);
    assert_eq!(std::fs::read_to_string(site.dir.path().join("01_Projects/plan.md")).unwrap(), edited.replace("\r\n", "\n"));
    let shown = get(app, &format!("/proposals/{id}"), Some(&cookie)).await;
    assert!(shown.body.contains("id=\"state\">applied<"), "{}", shown.body);
    // The receipt names the web, not the CLI; its page links the note and the proposal.
    let receipts = get(app, "/receipts", Some(&cookie)).await;
    assert!(receipts.body.contains("<td>web.apply</td>"), "{}", receipts.body);
    assert!(!receipts.body.contains("cli.apply"), "{}", receipts.body);
    assert!(
        receipts.body.contains(&format!("href=\"/proposals/{id}\"")) && receipts.body.contains("href=\"/note/01_Projects/plan.md\""),
        "{}",
        receipts.body
    );
}

#[tokio::test]
async fn a_read_only_server_has_no_post_routes_and_needs_no_login() {
    let site = site("", true, true);
    let app = &site.app;
    assert_eq!(get(app, "/", None).await.status, StatusCode::OK);
    assert_eq!(get(app, "/note/01_Projects/plan.md", None).await.status, StatusCode::OK);
    assert!(!get(app, "/note/01_Projects/plan.md", None).await.body.contains("id=\"edit\""));
    assert_eq!(get(app, "/login", None).await.status, StatusCode::NOT_FOUND);
    for uri in ["/login", "/logout", "/maintenance/archive", "/edit/01_Projects/plan.md"] {
        let answer = post(app, uri, None, &[]).await;
        assert!(matches!(answer.status, StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND), "POST {uri}: {}", answer.status);
    }
    let zeros = "0".repeat(64);
    assert_eq!(post(app, &format!("/proposals/{zeros}/decide"), None, &[]).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn without_an_approver_pages_are_readable_on_loopback_and_changes_are_refused() {
    let site = site(HUMAN_PROJECTS, false, false);
    let app = &site.app;
    assert_eq!(get(app, "/", None).await.status, StatusCode::OK);
    let form_page = get(app, "/login", None).await;
    let cookie = form_page.session_cookie().unwrap();
    let login = post(app, "/login", Some(&cookie), &[("csrf", &form_page.csrf()), ("approver", "alice"), ("secret", SECRET)]).await;
    assert_eq!(login.status, StatusCode::SERVICE_UNAVAILABLE, "no approver is registered: {}", login.body);
    let edit = post(app, "/edit/01_Projects/plan.md", Some(&cookie), &[("csrf", &form_page.csrf()), ("content", "x")]).await;
    assert_eq!(edit.status, StatusCode::FORBIDDEN, "an anonymous session changes nothing");
}

#[test]
fn a_non_loopback_address_needs_a_registered_approver_and_a_login() {
    let config = tempfile::tempdir().unwrap();
    let mut options = web_options(config.path(), false);
    options.bind = SocketAddr::from(([0, 0, 0, 0], 8742));
    assert_eq!(web::check_bind(&options).unwrap_err().code(), "not_configured");
    secrets::add_approver(config.path(), "alice", SECRET).unwrap();
    web::check_bind(&options).unwrap();
    options.read_only = true;
    assert_eq!(web::check_bind(&options).unwrap_err().code(), "not_configured", "a read-only server has no login");
    options.bind = SocketAddr::from(([127, 0, 0, 1], 8742));
    web::check_bind(&options).unwrap();
}

/// Every tag of `html` (between `<` and `>`), lower-cased.
fn tags_of(html: &str) -> Vec<String> {
    html.split('<').skip(1).map(|rest| rest.split('>').next().unwrap_or("").to_lowercase()).collect()
}

/// The rendered body of a note page.
fn note_body(page: &str) -> &str {
    let start = page.find("id=\"note-body\"").unwrap();
    &page[start..page[start..].find("</section>").unwrap() + start]
}

#[tokio::test]
async fn a_note_renders_as_obsidian_users_write_it_and_the_tag_graph_and_file_views_follow_the_engine() {
    let body = "Go to [[garden]], [[garden|the beds]] and [[garden#Beds]]; [[nowhere]] is broken.\n\n\
                - [ ] weed\n- [x] water\n\n\
                > [!warning] Mind the frost\n> Cover the beds.\n\n\
                Roses need sun.[^sun]\n\n[^sun]: At least six hours.\n\n\
                Filed under #gardening and #plants/roses, not #1.\n\n\
                ![[garden]]\n\n![[pic.png]]\n\n`[[code]] #code`\n";
    let mut daily = note("Resource", "Daily", body);
    daily = daily.replace("timestamp:", "tags: [gardening, outdoors]\ntimestamp:");
    let fixture = format!(
        "-- 03_Resources/daily.md --\n{daily}-- 03_Resources/garden.md --\n{}-- 03_Resources/pic.png --\nPNGBYTES\n-- 03_Resources/_index.md --\n# Resources\n\n- [[garden]]\n",
        note("Resource", "Garden", "# Beds\n\nThe garden has three raised beds.\n")
    );
    let site = site(&fixture, false, true);
    let (cookie, _) = log_in(&site.app).await;
    let c = Some(cookie.as_str());
    let page = get(&site.app, "/note/03_Resources/daily.md", c).await;
    assert_eq!(page.status, StatusCode::OK);
    let rendered = note_body(&page.body);
    assert!(
        rendered.contains("<a class=\"wikilink\" href=\"/note/03_Resources/garden.md\" rel=\"noopener noreferrer nofollow\">garden</a>"),
        "{rendered}"
    );
    assert!(
        rendered.contains("href=\"/note/03_Resources/garden.md\" rel=\"noopener noreferrer nofollow\">the beds</a>"),
        "the alias is the link text: {rendered}"
    );
    assert!(rendered.contains("class=\"wikilink broken\"") && rendered.contains("Broken link: no note named “nowhere”"), "{rendered}");
    assert!(rendered.contains("<input type=\"checkbox\" disabled=\"\" aria-label=\"to do\">"), "{rendered}");
    assert!(rendered.contains("<input type=\"checkbox\" disabled=\"\" checked=\"\" aria-label=\"done\">"), "{rendered}");
    assert!(rendered.contains("<div class=\"callout callout-warning\"><p class=\"callout-title\">Mind the frost</p>"), "{rendered}");
    assert!(rendered.contains("Cover the beds.") && !rendered.contains("[!warning]"), "{rendered}");
    assert!(rendered.contains("<sup class=\"fnref\"><a href=\"#fn-1\" id=\"fnref-1\""), "{rendered}");
    assert!(rendered.contains("<div class=\"footnote\" id=\"fn-1\">") && rendered.contains("At least six hours."), "{rendered}");
    assert!(
        rendered.contains("<a class=\"tag\" href=\"/tags/gardening\" rel=\"noopener noreferrer nofollow\">#gardening</a>"),
        "{rendered}"
    );
    assert!(
        rendered.contains("href=\"/tags/plants%2Froses\" rel=\"noopener noreferrer nofollow\">#plants/roses</a>")
            && rendered.contains("not #1."),
        "{rendered}"
    );
    assert!(
        rendered.contains("<div class=\"embed\">") && rendered.contains("The garden has three raised beds."),
        "a note embed shows its excerpt: {rendered}"
    );
    assert!(rendered.contains("<img class=\"embed-image\" src=\"/file/03_Resources/pic.png\" alt=\"pic.png\">"), "{rendered}");
    assert!(rendered.contains("<code>[[code]] #code</code>"), "code is never rendered as links: {rendered}");
    // Frontmatter lists are lists, tags link to the tag view.
    assert!(page.body.contains("<ul class=\"chips\"><li><a class=\"tag\" href=\"/tags/gardening\">#gardening</a></li>"), "{}", page.body);
    assert!(page.body.contains("aria-label=\"breadcrumb\""), "breadcrumbs");
    // Backlinks: the notes whose links resolve here, not the catalog page.
    let garden = get(&site.app, "/note/03_Resources/garden.md", c).await;
    let backlinks = &garden.body[garden.body.find("id=\"backlinks\"").unwrap()..];
    assert!(backlinks.contains("03_Resources/daily.md"), "{backlinks}");
    assert!(!backlinks.contains("_index.md"), "catalog pages are no backlinks: {backlinks}");
    // The image embed is served from inside the vault with its type; other files are not.
    let image = get(&site.app, "/file/03_Resources/pic.png", c).await;
    assert_eq!(image.status, StatusCode::OK);
    assert_eq!(image.headers.get(header::CONTENT_TYPE).unwrap(), "image/png");
    assert_eq!(image.body, "PNGBYTES\n");
    assert_eq!(get(&site.app, "/file/03_Resources/pic.png", None).await.status, StatusCode::FOUND, "files need the login too");
    // Tags: the index, a tag's notes.
    let tags = get(&site.app, "/tags", c).await;
    assert!(tags.body.contains("href=\"/tags/gardening\">#gardening</a> <span class=\"count\">1</span>"), "{}", tags.body);
    let tagged = get(&site.app, "/tags/Gardening", c).await;
    assert!(tagged.body.contains("03_Resources/daily.md") && !tagged.body.contains("03_Resources/garden.md\""), "{}", tagged.body);
    // The graph: the neighbourhood holds the note and what it links to, as links; no script.
    let graph = get(&site.app, "/graph?note=03_Resources/daily.md", c).await;
    assert!(graph.body.contains("<svg class=\"graph\""), "{}", graph.body);
    assert!(graph.body.contains("<a href=\"/note/03_Resources/garden.md\">"), "{}", graph.body);
    assert!(graph.body.contains("2 notes, 1 links"), "daily → garden: {}", graph.body);
    let whole = get(&site.app, "/graph", c).await;
    assert!(whole.body.contains("03_Resources/daily.md") && whole.body.contains("03_Resources/garden.md"), "{}", whole.body);
    assert!(!whole.body.contains("_index.md"), "catalog pages are not in the graph");
    assert_eq!(scripts_of(&whole.body), vec![APP_SCRIPT], "the graph needs no script of its own");
}

#[tokio::test]
async fn payloads_inside_wikilinks_callouts_tags_and_embeds_render_inert() {
    let body = "[[<script>alert(1)</script>]] [[x|<img src=x onerror=alert(1)>]] [[javascript:alert(1)]]\n\n\
                [[\"><svg onload=alert(1)>|a\"b]] ![[<svg onload=alert(1)>]] ![[javascript:alert(1).png]] ![[x\" onerror=\"alert(1).png]]\n\n\
                > [!note\"><script>alert(1)</script>] <img src=x onerror=alert(1)>\n> body\n\n\
                > [!warning] <script>alert(2)</script>\n\n\
                #<script>alert(1)</script> #a\"onmouseover=alert(1) #ok<b>x</b>\n\n\
                x[^<script>]\n\n[^<script>]: <img src=x onerror=alert(1)>\n\n\
                - [x] <script>alert(1)</script>\n";
    let hostile = note("Resource", "Payloads", body);
    let site = site(&format!("-- 03_Resources/payloads.md --\n{hostile}"), false, true);
    let (cookie, _) = log_in(&site.app).await;
    let page = get(&site.app, "/note/03_Resources/payloads.md", Some(&cookie)).await;
    assert_eq!(page.status, StatusCode::OK);
    let rendered = note_body(&page.body);
    for tag in tags_of(rendered) {
        let name = tag.trim_start_matches('/').split([' ', '/']).next().unwrap_or("").to_string();
        let allowed = ["div", "section", "p", "a", "span", "ul", "li", "input", "sup", "blockquote", "img", "code"];
        assert!(allowed.contains(&name.as_str()), "unexpected markup <{tag}> in {rendered}");
        // Attribute names outside the quoted values: no handler; every URL on this server or http(s).
        let unquoted: String = tag.split('"').step_by(2).collect::<Vec<_>>().join("\"\"");
        assert!(!unquoted.contains(" on") && !unquoted.contains("style"), "active attribute in <{tag}>: {rendered}");
        for attribute in [" href=\"", " src=\""] {
            if let Some(at) = tag.find(attribute) {
                let url = &tag[at + attribute.len()..];
                assert!(url.starts_with('/') || url.starts_with('#') || url.starts_with("https://"), "<{tag}>: {rendered}");
            }
        }
        if name == "img" {
            assert!(tag.contains("src=\"/file/"), "an image only from the vault: <{tag}>");
        }
        if name == "input" {
            assert!(tag.starts_with("input type=\"checkbox\" disabled"), "only disabled checkboxes: <{tag}>");
        }
        if let Some(at) = tag.find(" id=\"") {
            let id = &tag[at + 5..];
            assert!(id.starts_with("fn-") || id.starts_with("fnref-"), "only footnote ids: <{tag}>");
        }
    }
    assert!(rendered.contains("&lt;script&gt;"), "payloads are shown as text: {rendered}");
    assert_eq!(scripts_of(&page.body), vec![APP_SCRIPT], "no page carries a script but the app's own file");
}

#[tokio::test]
async fn approve_is_off_with_the_gates_reason_when_the_gate_would_refuse_and_tasks_have_pages() {
    let site = site(HUMAN_PROJECTS, false, true);
    let app = &site.app;
    let (cookie, csrf) = log_in(app).await;
    let c = Some(cookie.as_str());
    let edit = get(app, "/edit/01_Projects/plan.md", c).await;
    let sha_at = edit.body.find("name=\"expected_sha256\" value=\"").unwrap() + "name=\"expected_sha256\" value=\"".len();
    let sha = edit.body[sha_at..sha_at + 64].to_string();
    let broken = note("Project", "Plan", "Now links [[nowhere-at-all]].\n");
    let proposed = post(app, "/edit/01_Projects/plan.md", c, &[("csrf", &csrf), ("content", &broken), ("expected_sha256", &sha)]).await;
    assert_eq!(proposed.status, StatusCode::SEE_OTHER, "{}", proposed.body);
    let shown = get(app, proposed.location(), c).await;
    assert!(shown.body.contains("id=\"gate-verdict\">would refuse<"), "{}", shown.body);
    assert!(shown.body.contains("value=\"approve\" disabled"), "Approve is off: {}", shown.body);
    assert!(!shown.body.contains("accesskey=\"a\""), "a disabled Approve keeps no access key: {}", shown.body);
    assert!(shown.body.contains("accesskey=\"r\" aria-keyshortcuts=\"Alt+R\""), "Reject keeps its key");
    assert!(shown.body.contains("Approve is off, and so is its key"), "the key line says so: {}", shown.body);
    assert!(shown.body.contains("id=\"approve-why\"") && shown.body.contains("nowhere-at-all"), "with the gate's reason: {}", shown.body);
    assert!(shown.body.contains("id=\"reject\""), "Reject stays on");
    // Tasks: the list links each task to its page.
    let created = site_vault(&site).handoff_work(task_request()).unwrap();
    let id = serde_json::to_value(&created).unwrap()["task_id"].as_str().unwrap().to_string();
    let list = get(app, "/tasks", c).await;
    assert!(list.body.contains(&format!("href=\"/tasks/{id}\"")), "{}", list.body);
    let task = get(app, &format!("/tasks/{id}"), c).await;
    assert_eq!(task.status, StatusCode::OK, "{}", task.body);
    assert!(task.body.contains("Water the garden"), "{}", task.body);
    assert_eq!(get(app, "/tasks/no-such-task", c).await.status, StatusCode::NOT_FOUND);
    assert_eq!(get(app, "/tasks/bad%20id", c).await.status, StatusCode::BAD_REQUEST);
}

/// Another handle on the site's vault (an agent's).
fn site_vault(site: &Site) -> Vault {
    Vault::open(site.dir.path(), options()).unwrap()
}

fn task_request() -> paravault::api::handoff::HandoffRequest {
    serde_json::from_value(serde_json::json!({"action": "create", "task_id": "water-1", "objective": "Water the garden", "owner": "agent-1", "scope": ["01_Projects"]})).unwrap()
}

#[tokio::test]
async fn the_whole_vault_graph_and_the_dashboards_lint_figures_follow_writes_without_a_whole_recount_per_request() {
    let site = site("", false, false);
    let app = &site.app;
    let long_lived = site_vault(&site);
    long_lived.watch_disk();
    let before = long_lived.link_graph(None, 100).unwrap();
    assert_eq!(before.nodes.len(), 2, "plan and its linker: {before:?}");
    // Writes and an outside edit: the kept link index catches up from the change log.
    let writer = site_vault(&site);
    writer.ingest_note(&crate::support::ingest("01_Projects/hub", "Links to [[plan]] and [[linker]].\n")).unwrap();
    std::fs::write(site.dir.path().join("03_Resources/linker.md"), note("Resource", "Linker", "No links now.\n")).unwrap();
    long_lived.observe_disk().unwrap();
    let caught_up = long_lived.link_graph(None, 100).unwrap();
    let fresh = site_vault(&site).link_graph(None, 100).unwrap();
    let shape = |g: &paravault::vault::LinkGraph| {
        let mut edges: Vec<(String, String)> = g.edges.iter().map(|&(a, b)| (g.nodes[a].path.clone(), g.nodes[b].path.clone())).collect();
        edges.sort();
        (g.nodes.iter().map(|n| (n.path.clone(), n.degree)).collect::<Vec<_>>(), edges)
    };
    assert_eq!(shape(&caught_up), shape(&fresh), "caught up equals a whole rebuild");
    assert_eq!(
        shape(&caught_up).1,
        vec![
            ("01_Projects/hub.md".to_string(), "01_Projects/plan.md".to_string()),
            ("01_Projects/hub.md".to_string(), "03_Resources/linker.md".to_string())
        ]
    );
    let bounded = long_lived.link_graph(None, 1).unwrap();
    assert_eq!((bounded.nodes.len(), bounded.nodes[0].path.as_str(), bounded.left_out), (1, "01_Projects/hub.md", 2));

    // The dashboard's lint figures: computed once for a model state, named as older after a
    // write until recomputed, never presented as current for a state they were not computed for.
    let (_, current) = long_lived.doctor_latest().unwrap();
    assert!(current, "the first ask computes them");
    writer.ingest_note(&crate::support::ingest("01_Projects/orphan", "Nobody links here.\n")).unwrap();
    long_lived.observe_disk().unwrap();
    let (older, current) = long_lived.doctor_latest().unwrap();
    assert!(!current, "a write moved the model on");
    let summary = long_lived.health_summary().unwrap();
    assert!(long_lived.doctor_latest().unwrap().1, "recomputed for the model now");
    assert_eq!(summary.counts, long_lived.lint().unwrap().counts, "the kept summary is the lint's");
    assert!(summary.computed_from.notes > older.vault_check.unwrap().computed_from.notes);
    let dashboard = get(app, "/", None).await;
    assert_eq!(dashboard.status, StatusCode::OK);
    assert!(dashboard.body.contains("Lint findings: "), "{}", dashboard.body);
}

#[tokio::test]
async fn an_edit_conflict_keeps_the_typed_text_and_shows_base_theirs_and_yours() {
    let site = site("", false, true);
    let app = &site.app;
    let (cookie, csrf) = log_in(app).await;
    let file = site.dir.path().join("01_Projects/plan.md");
    let base = std::fs::read_to_string(&file).unwrap();
    let edit = get(app, "/edit/01_Projects/plan.md", Some(&cookie)).await;
    assert!(edit.body.contains("name=\"base\""), "the form carries the text it shows: {}", edit.body);
    let sha = paravault::api::engine::sha256_hex(base.as_bytes());
    // Someone else changes the note while the person types.
    let theirs = base.replace("The plan body mentions zebras.", "The plan body mentions zebras.\nTheir new line.");
    std::fs::write(&file, &theirs).unwrap();
    let yours = base.replace("The plan body mentions zebras.", "The plan body mentions okapis.");
    let conflict = post(
        app,
        "/edit/01_Projects/plan.md",
        Some(&cookie),
        &[("csrf", &csrf), ("content", &yours.replace('\n', "\r\n")), ("expected_sha256", &sha), ("base", &base.replace('\n', "\r\n"))],
    )
    .await;
    assert_eq!(conflict.status, StatusCode::CONFLICT, "{}", conflict.body);
    let section = |id: &str| {
        let at = conflict.body.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("{id}: {}", conflict.body));
        conflict.body[at..at + conflict.body[at..].find("</pre>").unwrap()].to_string()
    };
    let their_part = section("conflict-theirs");
    assert!(their_part.contains("<span class=\"add\">+ Their new line.</span>") && !their_part.contains("okapis"), "{their_part}");
    let your_part = section("conflict-yours");
    assert!(
        your_part.contains("<span class=\"del\">- The plan body mentions zebras.</span>")
            && your_part.contains("<span class=\"add\">+ The plan body mentions okapis.</span>")
            && !your_part.contains("Their new line"),
        "{your_part}"
    );
    assert!(conflict.body.contains("The plan body mentions okapis.\n</textarea>"), "the typed text is kept: {}", conflict.body);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), theirs, "nothing was written");
    // A base that is not the version named is not shown as one.
    let forged = post(
        app,
        "/edit/01_Projects/plan.md",
        Some(&cookie),
        &[("csrf", &csrf), ("content", &yours), ("expected_sha256", &sha), ("base", "made up")],
    )
    .await;
    assert_eq!(forged.status, StatusCode::CONFLICT);
    assert!(!forged.body.contains("id=\"conflict-theirs\"") && forged.body.contains("id=\"conflict-diff\""), "{}", forged.body);
}

/// On a replica the search page says which team commit the answer reflects and how far behind
/// the remote the replica was when it last looked (issue 49); elsewhere it says nothing of it.
/// The replica is a hand-made vault (no `.paravault/` yet): `remote add` creates the folder.
#[tokio::test(flavor = "multi_thread")]
async fn the_search_page_of_a_replica_says_how_fresh_the_answer_is() {
    let plain = site("", true, false);
    let alone = get(&plain.app, "/search?q=zebras&mode=fts", None).await;
    assert_eq!(alone.status, StatusCode::OK);
    assert!(!alone.body.contains("replica-freshness"), "{}", alone.body);

    let (dir, vault) = vault(&format!("-- 01_Projects/plan.md --\n{}", note("Project", "Plan", "The plan mentions zebras.\n")));
    let bare = dir.path().with_extension("remote.git");
    let out = std::process::Command::new("git").args(["init", "-q", "--bare", "-b", "main"]).arg(&bare).output().unwrap();
    assert!(out.status.success());
    vault.remote_add("origin", bare.to_str().unwrap()).unwrap();
    assert!(vault.replicate().unwrap().pushed);
    let head = String::from_utf8(
        std::process::Command::new("git").arg("-C").arg(&bare).args(["rev-parse", "refs/heads/main"]).output().unwrap().stdout,
    )
    .unwrap();
    let config = tempfile::tempdir().unwrap();
    let app = web::router(vault, &web_options(config.path(), true));
    let page = get(&app, "/search?q=zebras&mode=fts", None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("id=\"replica-freshness\""), "{}", page.body);
    assert!(page.body.contains(&head.trim()[..12]), "the team commit: {}", page.body);
    assert!(page.body.contains("0 behind the remote when it last looked"), "{}", page.body);
    let _ = std::fs::remove_dir_all(&bare);
}

/// Every `<script` tag of a page, up to its `>`: pages carry only the app's own file, never an
/// inline script.
fn scripts_of(body: &str) -> Vec<String> {
    let lower = body.to_lowercase();
    lower.match_indices("<script").map(|(i, _)| lower[i..].split('>').next().unwrap_or("").to_string()).collect()
}

const APP_SCRIPT: &str = "<script src=\"/static/app.js\" defer";

/// The row of table `#days` for `day`, as its cells' text.
fn day_row(body: &str, day: &str) -> Vec<String> {
    let table = &body[body.find("id=\"days\"").expect("the days table")..];
    let at = table.find(&format!("<tr><td>{day}</td>")).unwrap_or_else(|| panic!("no row for {day}: {table}"));
    let row = &table[at..at + table[at..].find("</tr>").unwrap()];
    row.split("<td>").skip(1).map(|cell| cell.split("</td>").next().unwrap().to_string()).collect()
}

#[tokio::test]
async fn the_charts_page_draws_the_receipts_and_the_folders_rot_and_a_hostile_folder_name_stays_text() {
    // Two notes in a folder whose name is markup: one past its expiry (stale on the test day,
    // 2026-06-01) with a broken link, one fresh.
    let stale = "---\ntype: Resource\ntitle: Old\ndescription: d\nexpiry: 2026-02-01\ntimestamp: 2026-01-01T00:00:00Z\n---\nSee [[nowhere-at-all]].\n";
    let fixture = format!(
        "{HUMAN_PROJECTS}-- 03_Resources/<script>alert(1)/old.md --\n{stale}-- 03_Resources/<script>alert(1)/fresh.md --\n{}",
        note("Resource", "Fresh", "Fresh.\n")
    );
    let site = site(&fixture, false, true);
    let app = &site.app;
    let (cookie, csrf) = log_in(app).await;
    let c = Some(cookie.as_str());
    // Real receipts: two ingests, and an edit proposed, approved and applied in the web UI.
    let writer = site_vault(&site);
    writer.ingest_note(&crate::support::ingest("02_Areas/one", "Links to [[plan]].\n")).unwrap();
    writer.ingest_note(&crate::support::ingest("02_Areas/two", "Nobody links here.\n")).unwrap();
    let edit = get(app, "/edit/01_Projects/plan.md", c).await;
    let sha_at = edit.body.find("name=\"expected_sha256\" value=\"").unwrap() + "name=\"expected_sha256\" value=\"".len();
    let sha = edit.body[sha_at..sha_at + 64].to_string();
    let text = note("Project", "Plan", "The plan, edited in the browser.\n");
    let proposed = post(app, "/edit/01_Projects/plan.md", c, &[("csrf", &csrf), ("content", &text), ("expected_sha256", &sha)]).await;
    let id = proposed.location().trim_start_matches("/proposals/").to_string();
    let decided = post(app, &format!("/proposals/{id}/decide"), c, &[("csrf", &csrf), ("decision", "approve")]).await;
    assert_eq!(decided.status, StatusCode::SEE_OTHER, "{}", decided.body);
    let review = get(app, &format!("/proposals/{id}"), c).await;
    assert!(
        review.body.contains("id=\"apply\" type=\"submit\" accesskey=\"p\" aria-keyshortcuts=\"Alt+P\""),
        "Apply has its key: {}",
        review.body
    );
    let applied = post(app, &format!("/proposals/{id}/apply"), c, &[("csrf", &csrf)]).await;
    assert_eq!(applied.status, StatusCode::SEE_OTHER, "{}", applied.body);

    // What the receipts say about today, counted here from the history itself.
    let today = chrono::Utc::now().date_naive().to_string();
    let history = writer.read_memory_history(1000, 0).unwrap();
    let todays: Vec<&serde_json::Value> = history.iter().filter(|r| r["at"].as_str().is_some_and(|at| at.starts_with(&today))).collect();
    let ok: Vec<&&serde_json::Value> = todays.iter().filter(|r| r["status"] == "ok").collect();
    let written: usize = ok.iter().map(|r| r["notes"].as_array().map_or(1, Vec::len)).sum();
    let approved = ok.iter().filter(|r| r["approval"].is_object()).count();
    let last = ok.iter().rev().find(|r| r["notes_scanned"].is_string()).expect("a write that recorded its counts");
    let orphans: u64 = ok.iter().filter_map(|r| r["lint_orphans"].as_str()).map(|n| n.parse::<u64>().unwrap()).sum();
    assert_eq!((written, approved), (3, 1), "two ingests and one approved apply: {todays:?}");
    assert!(orphans >= 1, "02_Areas/two is an orphan when written: {todays:?}");

    let page = get(app, "/charts", c).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let row = day_row(&page.body, &today);
    let expected: Vec<String> = [
        todays.len().to_string(),
        todays.iter().filter(|r| r["status"] == "aborted").count().to_string(),
        written.to_string(),
        approved.to_string(),
        last["notes_scanned"].as_str().unwrap().to_string(),
        last["notes_excluded"].as_str().unwrap().to_string(),
        orphans.to_string(),
    ]
    .to_vec();
    assert_eq!(row[1..], expected[..], "today's row: {row:?}");
    for chart in ["chart-invalid", "chart-orphans", "chart-notes", "chart-written", "chart-receipts", "chart-approved", "chart-rot"] {
        let at = page.body.find(&format!("id=\"{chart}\"")).unwrap_or_else(|| panic!("{chart} is drawn"));
        let svg = &page.body[page.body[..at].rfind("<svg").unwrap()..];
        let svg = &svg[..svg.find("</svg>").unwrap()];
        assert!(svg.contains("role=\"img\"") && svg.contains(&format!("aria-labelledby=\"{chart}-title {chart}-desc\"")), "{svg}");
        assert!(svg.contains(&format!("<title id=\"{chart}-title\">")) && svg.contains(&format!("<desc id=\"{chart}-desc\">")), "{svg}");
    }
    assert!(page.body.contains(&format!("{today}: {written} notes written")), "today's column has its count: {}", page.body);
    assert!(page.body.contains(&format!("{today}: 1 approved writes")), "{}", page.body);
    // What receipts do not record is said, with the figure now.
    assert!(page.body.contains("Receipts record no count of broken links"), "{}", page.body);
    assert!(page.body.contains("id=\"now-broken\">1<") && page.body.contains("id=\"now-stale\">1<"), "{}", page.body);
    // Rot by folder: the hostile folder's name is text, its share drawn and tabled.
    assert!(!page.body.contains("<script>alert"), "the folder name is escaped: {}", page.body);
    assert!(page.body.contains("03_Resources/&lt;script&gt;alert(1): 1 of 2 · 50.0%"), "{}", page.body);
    assert!(page.body.contains("href=\"/browse/03_Resources/%3Cscript%3Ealert%281%29\""), "{}", page.body);
    assert_eq!(scripts_of(&page.body), vec![APP_SCRIPT], "no script but the app's own");
    let rot = &page.body[page.body.find("id=\"chart-rot\"").unwrap()..];
    assert!(rot.find("&lt;script&gt;alert(1)").unwrap() < rot.find("01_Projects").unwrap(), "the most rotten folder first");
    // The navigation links the page; the legend lists the shortcuts.
    assert!(page.body.contains("<a href=\"/charts\">Charts</a>"));
    assert!(page.body.contains("id=\"shortcuts\"") && page.body.contains("<kbd>Alt+P</kbd>"), "{}", page.body);
}

#[tokio::test]
async fn the_quick_switcher_finds_notes_by_title_from_the_kept_index_and_follows_writes() {
    let hostile = note("Resource", "<img src=x onerror=alert(1)> Garden River", "x\n");
    let site = site(&format!("-- 03_Resources/river.md --\n{hostile}"), false, false);
    let app = &site.app;
    // Without a script: a form whose answer lists the matches as links.
    let page = get(app, "/switch?q=pla", None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("<a href=\"/note/01_Projects/plan.md\">Plan</a>"), "{}", page.body);
    assert!(!page.body.contains("linker.md"), "{}", page.body);
    // A word inside the title, any case; the hostile title stays text.
    let word = get(app, "/switch?q=RIVER", None).await;
    assert!(word.body.contains("03_Resources/river.md"), "{}", word.body);
    assert!(word.body.contains("&lt;img src=x onerror=alert(1)&gt; Garden River") && !word.body.contains("<img src=x"), "{}", word.body);
    assert!(get(app, "/switch?q=zzz", None).await.body.contains("id=\"switch-none\""));
    // The script's endpoint: JSON with each note's URL.
    let json = get(app, "/switch/titles?q=garden%20ri", None).await;
    assert_eq!(json.status, StatusCode::OK);
    let found: serde_json::Value = serde_json::from_str(&json.body).unwrap();
    assert_eq!(found["matches"][0]["url"], "/note/03_Resources/river.md", "{found}");
    assert_eq!(found["more"], false);
    assert_eq!(get(app, "/switch/titles?q=%01", None).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(get(app, &format!("/switch?q={}", "a".repeat(201)), None).await.status, StatusCode::BAD_REQUEST);

    // The engine's answer: whole-title starts first, the bound, and writes followed (the kept
    // index caught up from the change log equals a fresh one).
    let long_lived = site_vault(&site);
    long_lived.watch_disk();
    let titles = |v: &Vault, q: &str, n: usize| {
        let found = v.find_titles(q, n).unwrap();
        (found.matches.into_iter().map(|m| m.path).collect::<Vec<_>>(), found.more)
    };
    assert_eq!(titles(&long_lived, "l", 10).0, vec!["03_Resources/linker.md"]);
    let writer = site_vault(&site);
    for name in ["alpha", "beta", "gamma"] {
        writer.ingest_note(&crate::support::ingest(&format!("02_Areas/{name}"), "x\n")).unwrap();
    }
    std::fs::remove_file(site.dir.path().join("03_Resources/linker.md")).unwrap();
    long_lived.observe_disk().unwrap();
    // ingest titles are "Title of 02_Areas/<name>": "title" starts them all; "of" is a word.
    let caught_up = titles(&long_lived, "title of", 10);
    assert_eq!(caught_up, titles(&site_vault(&site), "title of", 10), "caught up equals a fresh index");
    assert_eq!(caught_up.0, vec!["02_Areas/alpha.md", "02_Areas/beta.md", "02_Areas/gamma.md"], "{caught_up:?}");
    assert_eq!(titles(&long_lived, "of 02", 2), (vec!["02_Areas/alpha.md".to_string(), "02_Areas/beta.md".to_string()], true));
    assert!(titles(&long_lived, "linker", 10).0.is_empty(), "a removed note is gone");
    assert!(titles(&long_lived, "   ", 10).0.is_empty());
    assert_eq!(titles(&long_lived, "GAMMA", 10).0, vec!["02_Areas/gamma.md"], "the file name, any case");
}
