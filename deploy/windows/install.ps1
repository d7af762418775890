# Installs sandboxd as a Windows service. Run it elevated, from the directory
# holding sandboxd.exe (and sandboxctl.exe, when you want the client too):
#
#   powershell -ExecutionPolicy Bypass -File install.ps1 [-Source DIR] [-Destination DIR] [-DaemonArgs @(...)]
#
# It copies the binaries to -Destination (default %ProgramFiles%\sandboxd),
# runs `sandboxd.exe install` from there, which provisions the sandbox users
# and firewall filters and registers the service, and starts the service.
# Run again with a newer sandboxd.exe, it stops the service, replaces the
# binaries and brings the service up to date. See README.md.
#Requires -RunAsAdministrator
[CmdletBinding()]
param(
    # Where sandboxd.exe (and optionally sandboxctl.exe) are now.
    [string]$Source = $PSScriptRoot,
    # Where the service runs them from. It must be writable by administrators
    # only: whoever can replace sandboxd.exe runs code as LocalSystem.
    [string]$Destination = (Join-Path $env:ProgramFiles 'sandboxd'),
    # Daemon flags the service runs with, e.g. @('--metrics', '127.0.0.1:9464').
    [string[]]$DaemonArgs = @()
)
Set-StrictMode -Version Latest
$ErrorActionPreference = 'Stop'

$daemon = Join-Path $Source 'sandboxd.exe'
if (-not (Test-Path -LiteralPath $daemon -PathType Leaf)) {
    throw "no sandboxd.exe in $Source (pass -Source)"
}

# A running service holds its binary open; it is started again below.
$service = Get-Service -Name 'sandboxd' -ErrorAction SilentlyContinue
if ($service -and $service.Status -ne 'Stopped') {
    Stop-Service -Name 'sandboxd'
    $service.WaitForStatus('Stopped', [TimeSpan]::FromSeconds(60))
}

New-Item -ItemType Directory -Force -Path $Destination | Out-Null
foreach ($name in 'sandboxd.exe', 'sandboxctl.exe') {
    $from = Join-Path $Source $name
    if (Test-Path -LiteralPath $from -PathType Leaf) {
        Copy-Item -LiteralPath $from -Destination (Join-Path $Destination $name) -Force
    }
}

$installed = Join-Path $Destination 'sandboxd.exe'
& $installed @DaemonArgs install
if ($LASTEXITCODE -ne 0) {
    throw "sandboxd.exe install failed with exit code $LASTEXITCODE"
}

Start-Service -Name 'sandboxd'
(Get-Service -Name 'sandboxd').WaitForStatus('Running', [TimeSpan]::FromSeconds(30))
Write-Host "sandboxd is running; clients connect to \\.\pipe\sandboxd"
